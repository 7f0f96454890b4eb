//! The MCP server: the tool list, and each call's life (create or re-attach, wait with
//! progress, cancellation, deadline, answer).

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use rmcp::model::{
    self, CallToolRequestParams, CallToolResponse, CallToolResult, ConstString, ContentBlock,
    CustomRequest, CustomResult, Implementation, JsonObject, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::McpSettings;
use super::calls::{Call, Calls};
use super::dropped::Link;
use super::sessions::Table;
use super::tools::{self, Caller, Refusal, Told};
use crate::interaction::{
    Interaction, InteractionId, NewInteraction, Registry, RegistryError, Resolution, clip, now,
};
use crate::metrics::Metrics;
use crate::wire::Principal;
use jiff::Timestamp;

/// Longest agent label kept (the registry's limit for `agent`).
const MAX_AGENT_CHARS: usize = 200;
/// How long past an interaction's deadline a call waits for the registry to expire it before
/// expiring it itself.
const DEADLINE_SLACK: Duration = Duration::from_secs(1);

const REQUEST_APPROVAL: &str = "request_approval";
const PERMISSION_PROMPT: &str = "permission_prompt";
const ASK_HUMAN: &str = "ask_human";

const INSTRUCTIONS: &str = "imrelay relays your requests to people on their phones and \
desktops (Telegram, Feishu/Lark, Slack, WeCom, DingTalk, ntfy, Discord, Matrix, Web Push, webhooks, a web inbox). Use request_approval before an \
action that is risky, irreversible or beyond what you were asked to do, and ask_human when \
you need a person's decision between a few choices. Both wait until a person answers, which \
may take minutes; the answer says who decided and why. permission_prompt is for Claude \
Code's --permission-prompt-tool, not for calling directly.";

/// The MCP server behind `/mcp`: one per session, all sharing the registry.
#[derive(Clone)]
pub struct Relay {
    registry: Registry,
    progress_interval: Duration,
    shutdown: CancellationToken,
    calls: Arc<Calls>,
    sessions: Arc<Table>,
}

impl Relay {
    /// A server over `registry`, counting waiting calls in `metrics` and in their sessions'
    /// entries of `sessions`; calls end when `shutdown` fires or their session closes.
    pub(crate) fn new(
        registry: Registry,
        settings: &McpSettings,
        metrics: &Metrics,
        sessions: Arc<Table>,
        shutdown: CancellationToken,
    ) -> Self {
        Self {
            registry,
            progress_interval: Duration::from_secs(settings.progress_interval_secs),
            shutdown,
            calls: Calls::new(metrics),
            sessions,
        }
    }
}

/// Why a call ended before its answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ended {
    /// The client cancelled it (`notifications/cancelled`).
    Cancelled,
    /// The client's session closed (`DELETE /mcp`).
    SessionClosed,
    /// The connection carrying the call dropped, and the client did not come back in time.
    Dropped,
    /// imrelay is shutting down.
    Shutdown,
}

/// Which tool a call is for.
#[derive(Clone, Copy)]
enum Which {
    Approval,
    Permission,
    Ask,
}

impl Which {
    /// The tool a call names, and the interaction its arguments ask for (or the refusal the
    /// model reads); an unknown tool or arguments off its schema are invalid params.
    fn read(
        request: CallToolRequestParams,
        caller: &Caller,
    ) -> Result<(Which, Result<NewInteraction, Refusal>), ErrorData> {
        let name = request.name.as_ref();
        Ok(match name {
            REQUEST_APPROVAL => (
                Which::Approval,
                tools::approval(arguments(name, request.arguments)?, caller),
            ),
            PERMISSION_PROMPT => (
                Which::Permission,
                tools::permission(arguments(name, request.arguments)?, caller),
            ),
            ASK_HUMAN => (
                Which::Ask,
                tools::question(arguments(name, request.arguments)?, caller),
            ),
            other => {
                return Err(ErrorData::invalid_params(
                    format!(
                        "no tool named {:?}: the tools are {REQUEST_APPROVAL}, {ASK_HUMAN} and {PERMISSION_PROMPT}",
                        clip(other, 100)
                    ),
                    None,
                ));
            }
        })
    }

    /// The answer to a call whose interaction the registry refused: what the model can act
    /// on is a tool error; a store that cannot take it is an internal error.
    fn refused(self, e: RegistryError) -> Result<CallToolResponse, ErrorData> {
        match e {
            // Nothing was written: the model reads why, and may try again later.
            RegistryError::Full(full) => Ok(tool_error(format!(
                "imrelay cannot ask anyone now: {full}. Nothing was asked; do not go ahead \
                 as if approved."
            ))),
            RegistryError::Invalid(e) => Ok(tool_error(match self {
                Which::Ask => tools::ask_field(&e),
                _ => e.to_string(),
            })),
            RegistryError::Conflict(existing) => Ok(tool_error(format!(
                "id: {} is already taken by a different request: choose another id (the \
                 same id is for retrying the same call)",
                existing.id
            ))),
            e => Err(unavailable(&e)),
        }
    }

    fn told(self, i: &Interaction, r: &Resolution) -> Told {
        match self {
            Which::Approval => tools::approval_told(i, r),
            Which::Permission => tools::permission_told(r),
            Which::Ask => tools::ask_told(i, r),
        }
    }
}

fn tool<In: schemars::JsonSchema + 'static, Out: schemars::JsonSchema + 'static>(
    name: &'static str,
    title: &str,
    description: &'static str,
) -> Tool {
    text_tool::<In>(name, title, description).with_output_schema::<Out>()
}

/// A tool whose result is text only: no output schema, so no structured content either.
fn text_tool<In: schemars::JsonSchema + 'static>(
    name: &'static str,
    title: &str,
    description: &'static str,
) -> Tool {
    Tool::new(name, description, Arc::new(JsonObject::new()))
        .with_title(title)
        .with_input_schema::<In>()
        .with_annotations(
            ToolAnnotations::new()
                .read_only(true)
                .destructive(false)
                .open_world(true),
        )
}

/// The tools, built once.
static TOOLS: LazyLock<Vec<Tool>> = LazyLock::new(|| {
    vec![
        tool::<tools::ApprovalArgs, tools::ApprovalResult>(
            REQUEST_APPROVAL,
            "Ask a person to approve an action",
            "Ask a person to approve an action before you take it, and wait for the decision. \
             Use it for anything risky, irreversible or beyond what you were asked to do. \
             People answer from their phone or desktop, which may take minutes. Returns \
             approved or denied with the person's reason; if nobody answers in time the \
             action is not approved. Put what you want to do in `action` and what the person \
             needs to judge it (a command, a diff, a target) in `details`.",
        ),
        tool::<tools::AskArgs, tools::AskResult>(
            ASK_HUMAN,
            "Ask a person a question",
            "Ask a person a question and wait for the answer: with 2 to 4 `choices` (one, or \
             several with `multiple`; they may also type their own answer), as free text (no \
             `choices`), or as a form to fill in (`schema`, a flat JSON Schema of fields). \
             People answer from their phone or desktop, which may take minutes. Returns the \
             chosen labels and any typed text, the text typed, or the form's `content`; or \
             that the person declined or did not answer in time.",
        ),
        // Claude Code reads the decision from the first block of the result's content, which
        // it builds as an array of blocks only for a result without structured content (and
        // its MCP client wants structured content from a tool with an output schema).
        text_tool::<tools::PermissionPromptArgs>(
            PERMISSION_PROMPT,
            "Permission prompt for Claude Code",
            "For Claude Code's --permission-prompt-tool: asks a person whether the tool call \
             may run and returns Claude Code's permission decision as JSON text \
             ({\"behavior\":\"allow\",\"updatedInput\":{...}} or \
             {\"behavior\":\"deny\",\"message\":\"...\"}). Not meant to be called directly: \
             use request_approval.",
        ),
    ]
});

/// Reads a tool's arguments; a mismatch with its input schema is invalid params.
fn arguments<T: DeserializeOwned>(
    tool: &str,
    arguments: Option<JsonObject>,
) -> Result<T, ErrorData> {
    serde_json::from_value(Value::Object(arguments.unwrap_or_default()))
        .map_err(|e| ErrorData::invalid_params(format!("invalid arguments for {tool}: {e}"), None))
}

/// A result the model reads as a failure of the tool (a refusal it can act on).
fn tool_error(message: impl Into<String>) -> CallToolResponse {
    CallToolResult::error(vec![ContentBlock::text(message.into())]).into()
}

fn answer(told: Told) -> CallToolResponse {
    let mut result = CallToolResult::success(vec![ContentBlock::text(told.text)]);
    result.structured_content = told.structured;
    result.into()
}

/// The client (from its `initialize`) and the session of a call.
fn caller(ctx: &RequestContext<RoleServer>) -> Caller {
    let agent = ctx.peer.peer_info().and_then(|p| {
        let c = &p.client_info;
        let name = c.name.trim();
        let version = c.version.trim();
        let label = match (name.is_empty(), version.is_empty()) {
            (true, _) => return None,
            (false, true) => name.to_string(),
            (false, false) => format!("{name}/{version}"),
        };
        Some(clip(&label, MAX_AGENT_CHARS))
    });
    let session = session_of(ctx).map(|s| clip(s, MAX_AGENT_CHARS));
    Caller { agent, session }
}

/// Whom a call's pending interaction counts against: the agent token its HTTP request came
/// with, as for every other way of asking ([`Principal::owner`]).
fn owner_of(ctx: &RequestContext<RoleServer>) -> String {
    ctx.extensions
        .get::<axum::http::request::Parts>()
        .and_then(|p| p.extensions.get::<Principal>().cloned())
        .unwrap_or(Principal::Local)
        .owner()
}

/// The `Mcp-Session-Id` of a request.
fn session_of(ctx: &RequestContext<RoleServer>) -> Option<&str> {
    ctx.extensions
        .get::<axum::http::request::Parts>()
        .and_then(|p| p.headers.get("mcp-session-id"))
        .and_then(|v| v.to_str().ok())
}

/// The MCP methods a client sends that rmcp reads into typed requests: a request for one of
/// them that arrives as a custom request had parameters of the wrong shape.
const KNOWN_METHODS: &[&str] = &[
    model::InitializeResultMethod::VALUE,
    model::PingRequestMethod::VALUE,
    model::CompleteRequestMethod::VALUE,
    model::SetLevelRequestMethod::VALUE,
    model::GetPromptRequestMethod::VALUE,
    model::ListPromptsRequestMethod::VALUE,
    model::ListResourcesRequestMethod::VALUE,
    model::ListResourceTemplatesRequestMethod::VALUE,
    model::ReadResourceRequestMethod::VALUE,
    model::SubscribeRequestMethod::VALUE,
    model::UnsubscribeRequestMethod::VALUE,
    model::CallToolRequestMethod::VALUE,
    model::ListToolsRequestMethod::VALUE,
];

impl ServerHandler for Relay {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(
                Implementation::new("imrelay", env!("CARGO_PKG_VERSION")).with_title("imrelay"),
            )
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(TOOLS.clone()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        TOOLS.iter().find(|t| t.name == name).cloned()
    }

    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        let method = request.method.as_str();
        if KNOWN_METHODS.contains(&method) {
            let why = match (method, &request.params) {
                ("tools/call", Some(p)) => {
                    match serde_json::from_value::<CallToolRequestParams>(p.clone()) {
                        Err(e) => e.to_string(),
                        Ok(_) => "they do not match the method".into(),
                    }
                }
                (_, None) => "they are missing".into(),
                _ => "they do not match the method".into(),
            };
            return Err(ErrorData::invalid_params(
                format!("invalid params for {method}: {why}"),
                None,
            ));
        }
        Err(ErrorData::new(
            model::ErrorCode::METHOD_NOT_FOUND,
            clip(method, 100),
            None,
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let caller = caller(&ctx);
        // The session knows the call is under way (it is not idle), and ends it if it closes.
        let in_session = session_of(&ctx).and_then(|s| self.sessions.call(s));
        let (_busy, closed) = match in_session {
            Some((busy, closed)) => (Some(busy), closed),
            None => (None, CancellationToken::new()),
        };
        // Fires when no stream has carried the call's answer for the grace period.
        let dropped = ctx
            .extensions
            .get::<Arc<Link>>()
            .map_or_else(CancellationToken::new, |l| l.gone());
        let (which, new) = Which::read(request, &caller)?;
        let new = match new {
            Ok(new) => new,
            Err(Refusal(message)) => return Ok(tool_error(message)),
        };
        let keyed = new.id.is_some();
        let created = match self.registry.create_for(new, Some(&owner_of(&ctx))).await {
            Ok(created) => created,
            Err(e) => return which.refused(e),
        };
        let resolved = if created.interaction.is_pending() {
            // Waited on by id and times: the whole input stays with the store.
            let awaited = Awaited::of(&created.interaction);
            drop(created);
            let ends = Ends {
                closed: &closed,
                dropped: &dropped,
            };
            self.wait(&awaited, keyed, &caller, &ctx, ends).await?
        } else {
            created.interaction
        };
        match resolved.resolution.as_deref() {
            Some(r) => Ok(answer(which.told(&resolved, r))),
            // The wait ends only with a resolution; the store gave back something else.
            None => Err(ErrorData::internal_error(
                format!(
                    "{} ended without an answer; call again with the same id",
                    resolved.id
                ),
                None,
            )),
        }
    }
}

/// The error for a registry failure that is not the caller's (the store cannot take it).
fn unavailable(e: &RegistryError) -> ErrorData {
    ErrorData::internal_error(
        format!("imrelay cannot take this request now ({e}); try again shortly"),
        None,
    )
}

/// What ends a waiting call besides its answer, the client's cancellation and shutdown.
struct Ends<'a> {
    /// The session closed.
    closed: &'a CancellationToken,
    /// No stream carried the call for the grace period.
    dropped: &'a CancellationToken,
}

/// What a waiting call needs of its pending interaction.
struct Awaited {
    id: InteractionId,
    created_at: Timestamp,
    deadline: Timestamp,
    timeout_secs: u64,
}

impl Awaited {
    fn of(i: &Interaction) -> Self {
        Self {
            id: i.id.clone(),
            created_at: i.created_at,
            deadline: i.deadline,
            timeout_secs: i.timeout_secs(),
        }
    }
}

impl Relay {
    /// Waits for `i` to be resolved: until a person answers, its deadline passes, the client
    /// cancels the call, closes its session or stays away after its connection dropped
    /// (`ends`), or imrelay shuts down. Sends progress meanwhile when asked to.
    async fn wait(
        &self,
        i: &Awaited,
        keyed: bool,
        caller: &Caller,
        ctx: &RequestContext<RoleServer>,
        ends: Ends<'_>,
    ) -> Result<Arc<Interaction>, ErrorData> {
        let call = self.calls.join(&i.id);
        let remaining = i
            .deadline
            .as_millisecond()
            .saturating_sub(now().as_millisecond())
            .max(0);
        let until_deadline = Duration::from_millis(remaining as u64) + DEADLINE_SLACK;
        let waited = self.registry.wait(&i.id, until_deadline);
        tokio::pin!(waited);
        let progress = ctx.meta.get_progress_token();
        let mut ticker = tokio::time::interval_at(
            tokio::time::Instant::now() + self.progress_interval,
            self.progress_interval,
        );
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            tokio::select! {
                r = &mut waited => {
                    drop(call);
                    return match r {
                        Ok(Some(resolved)) => Ok(resolved),
                        // The deadline passed and the registry has not expired it yet.
                        Ok(None) => self.registry.expire(&i.id).await.map_err(|e| unavailable(&e)),
                        Err(e) => Err(unavailable(&e)),
                    };
                }
                _ = ticker.tick(), if progress.is_some() => {
                    if let Some(token) = &progress {
                        let _ = ctx.peer.notify_progress(progress_of(i, token.clone())).await;
                    }
                }
                () = self.shutdown.cancelled() => {
                    return Err(self.abandoned(call, i, keyed, caller, Ended::Shutdown).await);
                }
                () = ends.closed.cancelled() => {
                    return Err(self.abandoned(call, i, keyed, caller, Ended::SessionClosed).await);
                }
                () = ends.dropped.cancelled() => {
                    return Err(self.abandoned(call, i, keyed, caller, Ended::Dropped).await);
                }
                () = ctx.ct.cancelled() => {
                    return Err(self.abandoned(call, i, keyed, caller, Ended::Cancelled).await);
                }
            }
        }
    }

    /// The call ended before the answer (`why`). The interaction is withdrawn on every
    /// channel when no other call waits for it, except at shutdown for a call with an id: a
    /// retry after the restart picks up its answer.
    async fn abandoned(
        &self,
        call: Call,
        i: &Awaited,
        keyed: bool,
        caller: &Caller,
        why: Ended,
    ) -> ErrorData {
        let last = call.leave();
        // A session also closes when imrelay shuts down: that is the shutdown.
        let why = if self.shutdown.is_cancelled() {
            Ended::Shutdown
        } else {
            why
        };
        let shutting_down = why == Ended::Shutdown;
        let client = || caller.agent.clone().or_else(|| Some("mcp client".into()));
        let (reason, by) = match why {
            Ended::Shutdown => ("imrelay shut down before anyone answered".to_string(), None),
            Ended::SessionClosed => ("The MCP client closed its session".to_string(), client()),
            Ended::Cancelled => ("The MCP client cancelled the request".to_string(), client()),
            Ended::Dropped => (
                "The MCP client's connection dropped and it did not come back".to_string(),
                client(),
            ),
        };
        if last && !(shutting_down && keyed) {
            match self.registry.cancel(&i.id, Some(reason.clone()), by).await {
                Ok(_) | Err(RegistryError::AlreadyResolved(_) | RegistryError::NotFound(_)) => {}
                Err(e) => {
                    tracing::warn!(id = %i.id, error = %e, "cannot withdraw an abandoned MCP call");
                }
            }
        }
        if shutting_down && keyed {
            ErrorData::internal_error(
                format!(
                    "imrelay is shutting down; call again with the same id ({}) to wait for the answer",
                    i.id
                ),
                None,
            )
        } else {
            ErrorData::internal_error(reason, None)
        }
    }
}

/// A progress notification for a wait on `i`: seconds waited of its timeout.
fn progress_of(i: &Awaited, token: rmcp::model::ProgressToken) -> ProgressNotificationParam {
    let waited_ms = now()
        .as_millisecond()
        .saturating_sub(i.created_at.as_millisecond())
        .max(0);
    let waited = waited_ms as f64 / 1000.0;
    ProgressNotificationParam::new(token, waited)
        .with_total(i.timeout_secs as f64)
        .with_message(format!(
            "Waiting for a person to answer ({} s of {} s)",
            waited.floor(),
            i.timeout_secs
        ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_has_an_object_input_schema_and_only_permission_prompt_no_output_schema() {
        assert_eq!(TOOLS.len(), 3);
        for t in TOOLS.iter() {
            assert_eq!(t.input_schema["type"], "object", "{}", t.name);
            assert!(t.description.as_ref().is_some_and(|d| d.len() > 40));
            if t.name == PERMISSION_PROMPT {
                // Claude Code reads its text only, and only without structured content.
                assert!(t.output_schema.is_none());
                continue;
            }
            let out = t.output_schema.as_ref().expect("an output schema");
            assert_eq!(out["type"], "object", "{}", t.name);
            assert!(
                out["required"]
                    .as_array()
                    .unwrap()
                    .contains(&"summary".into())
            );
        }
        let ask = &TOOLS[1].input_schema;
        for field in [
            "question",
            "choices",
            "multiple",
            "schema",
            "id",
            "timeout_secs",
        ] {
            assert!(ask["properties"].get(field).is_some(), "ask_human.{field}");
        }
        assert_eq!(ask["required"], serde_json::json!(["question"]));
        let prompt = &TOOLS[2].input_schema;
        assert_eq!(
            prompt["required"],
            serde_json::json!(["tool_name", "input"])
        );
    }
}
