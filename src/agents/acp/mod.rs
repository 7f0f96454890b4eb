//! Agent Client Protocol agents (Gemini CLI, and the ACP adapters of Claude Code, Codex and
//! others): `POST /v1/hooks/acp`, the endpoint `imrelay acp -- <agent command>` hands each
//! `session/request_permission` to (see docs/acp.md).
//!
//! The proxy ([`crate::cli::acp`]) sits between an editor and the agent on standard input
//! and output and passes every message on unchanged, except the agent's permission requests:
//! it posts each here, with the session's working directory (from `session/new`) and the
//! agent's name (from `initialize`), and answers the agent with the `result` this endpoint
//! writes. Everything ACP-specific about the approval is here:
//!
//! - the request ([`wire::PermissionRequest`]): the tool call is mapped onto the names
//!   imrelay reads by [`as_claude_code`] (diffs as a patch, a command as `Bash`, anything else
//!   as `acp:<kind>`), its `title` is the interaction's title, and the session and working
//!   directory are shown with it;
//! - the id: derived from the session, the tool call's id and title, and the mapped input
//!   (`acp-<hash>`, in generations: [`super::shared`]);
//! - the answer, by the options' `kind` ([`Choices`]): Allow is the agent's `allow_once`
//!   option; "Always allow" (offered only when the agent offers an `allow_always` option
//!   besides an `allow_once` one) is its first `allow_always` option; Deny is its
//!   `reject_once` option, or its `reject_always` one if that is all it offers; with no such
//!   option the answer is `cancelled`. An option of a kind imrelay does not know is never
//!   chosen. Every surface shows, in the interaction's description, which option each answer
//!   gives, in the agent's own words;
//! - what ACP cannot carry back: the agent runs its own input, so the interaction is
//!   `input_fixed` (an edit-then-approve is refused where the person makes it), and a deny's
//!   reason never reaches the agent (it learns only the option chosen): the description says
//!   so on every surface before anyone answers;
//! - no decision (`{"result": null, "reason"}`): the deadline passed with `on_timeout =
//!   "ask"`, imrelay is shutting down, or nobody can be asked (the pending budget is full):
//!   the proxy then hands the request to the editor, unchanged, so its own prompt asks;
//! - withdrawal: when the prompt turn is cancelled (`session/cancel`), the agent withdraws
//!   the request (`$/cancel_request`), or the agent or the editor goes away, the proxy drops
//!   the call and the interaction is withdrawn on every channel
//!   ([`super::shared::HookCalls`]).

pub mod prompts;
pub mod session;
mod settings;
mod tools;
pub mod wire;

pub use settings::AcpHookSettings;
pub use tools::{GENERIC_PREFIX, as_claude_code};

use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::shared::{Abandoned, Generations, Refused, derived_base};
use super::turns::TurnBody;
use super::{Hooks, OnTimeout, steer};
use crate::interaction::sessions::{Delivery, SessionEvent};
use crate::interaction::{
    AgentResult, Interaction, Kind, NewInteraction, Outcome, PermissionResult, ValidationError,
};
use crate::wire::error::ApiError;
use crate::wire::extract::ApiJson;
use crate::wire::json_response;
use wire::{
    AgentInfo, OptionKind, PermissionOption, PermissionOutcome, PermissionRequest,
    PermissionResponse,
};

/// Where the endpoint is served.
pub const PATH: &str = "/v1/hooks/acp";

/// Where the proxy reports each session's turns ([`super::turns`]).
pub const SESSION_PATH: &str = "/v1/hooks/acp/session";

/// The agent's name on every channel when it gave none, and the `by` of a withdrawal.
pub const AGENT: &str = "acp";

/// How a request the proxy stopped waiting for is withdrawn everywhere.
const ABANDONED: Abandoned = Abandoned {
    by: AGENT,
    reason: "The agent stopped waiting for this answer (the prompt was cancelled in the editor, or the agent or the editor ended)",
};

/// Its derived ids in generations.
const GENERATIONS: Generations = Generations {
    adapter: "acp",
    abandoned: ABANDONED,
};

/// Longest agent name and session label kept (longer ones are cut): the interaction's own
/// limit for labels.
const MAX_LABEL_CHARS: usize = 200;

/// Longest title and working directory kept, in characters (the interaction's limit).
const MAX_TEXT_CHARS: usize = 16 * 1024;

/// What the proxy posts: the permission request's params, the tool call completed from the
/// agent's earlier `session/update` notifications, and what the proxy knows of the session
/// and the agent.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct HookBody {
    /// `session/request_permission`'s params.
    pub request: PermissionRequest,
    /// The session's working directory, from `session/new` (or `load`, `resume`, `fork`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// The agent, from its `initialize` result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentInfo>,
}

/// What the endpoint answers: the `result` to send the agent, or none (`null`), with why,
/// when nobody decided and the editor's own prompt is to ask.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
pub struct HookReply {
    /// `session/request_permission`'s result.
    pub result: Option<PermissionResponse>,
    /// Why there is no result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl HookReply {
    fn outcome(outcome: PermissionOutcome) -> Self {
        HookReply {
            result: Some(PermissionResponse { outcome }),
            reason: None,
        }
    }

    /// No decision: the editor asks.
    pub fn editor(reason: impl Into<String>) -> Self {
        HookReply {
            result: None,
            reason: Some(reason.into()),
        }
    }
}

/// Which of the agent's options each answer gives.
#[derive(Clone, Debug, PartialEq)]
pub struct Choices {
    /// What Allow gives: the first `allow_once` option, or the first `allow_always` one if
    /// the agent offers no other allow.
    pub allow: Option<PermissionOption>,
    /// What "Always allow" gives: the first `allow_always` option, when Allow is another one.
    pub always: Option<PermissionOption>,
    /// What Deny gives: the first `reject_once` option, else the first `reject_always`.
    pub deny: Option<PermissionOption>,
    /// Options of a kind imrelay does not know: never chosen.
    pub unknown: Vec<PermissionOption>,
}

impl Choices {
    /// The answers `options` allow.
    pub fn of(options: &[PermissionOption]) -> Choices {
        let first = |k: OptionKind| options.iter().find(|o| o.kind == k).cloned();
        let once = first(OptionKind::AllowOnce);
        let always = first(OptionKind::AllowAlways);
        Choices {
            allow: once.clone().or_else(|| always.clone()),
            always: once.and(always),
            deny: first(OptionKind::RejectOnce).or_else(|| first(OptionKind::RejectAlways)),
            unknown: options
                .iter()
                .filter(|o| o.kind == OptionKind::Other)
                .cloned()
                .collect(),
        }
    }

    /// The outcome a resolved interaction gives the agent.
    pub fn outcome(&self, result: &AgentResult) -> PermissionOutcome {
        let chosen = match result {
            AgentResult::Permission(PermissionResult::Allow {
                updated_permissions,
                ..
            }) => match (updated_permissions, &self.always) {
                (Some(_), Some(always)) => Some(always),
                _ => self.allow.as_ref(),
            },
            AgentResult::Permission(PermissionResult::Deny { .. }) | AgentResult::Elicit(_) => {
                self.deny.as_ref()
            }
        };
        match chosen {
            Some(o) => PermissionOutcome::Selected {
                option_id: o.option_id.clone(),
            },
            None => PermissionOutcome::Cancelled,
        }
    }

    /// What every surface shows as the interaction's description: which of the agent's
    /// options each answer gives, and what the agent never learns.
    pub fn description(&self, agent: &str) -> String {
        let name = |o: &PermissionOption| format!("“{}”", o.name.trim());
        let mut out = Vec::new();
        out.push(match &self.allow {
            Some(o) if o.kind == OptionKind::AllowAlways => format!(
                "Allow answers {agent}'s {} (it offers no allow for this call alone).",
                name(o)
            ),
            Some(o) => format!("Allow answers {agent}'s {}.", name(o)),
            None => format!(
                "{agent} offers no option to allow this call: Allow answers it as cancelled."
            ),
        });
        if let Some(o) = &self.always {
            out.push(format!("Always allow answers {}.", name(o)));
        }
        out.push(match &self.deny {
            Some(o) => format!("Deny answers {}.", name(o)),
            None => "Deny answers it as cancelled.".to_string(),
        });
        out.push(format!(
            "A reason given with a deny does not reach {agent}: ACP tells it only the option chosen."
        ));
        if !self.unknown.is_empty() {
            let names: Vec<String> = self.unknown.iter().map(name).collect();
            out.push(format!(
                "Not offered here (options of a kind imrelay does not know): {}.",
                names.join(", ")
            ));
        }
        out.join(" ")
    }
}

/// `text` cut to at most `max` characters.
fn clip(text: &str, max: usize) -> String {
    text.chars().take(max).collect()
}

/// `POST /v1/hooks/acp`
pub async fn hook(
    State(state): State<Hooks>,
    principal: crate::wire::Principal,
    ApiJson(body): ApiJson<HookBody>,
) -> Result<Response, ApiError> {
    let choices = Choices::of(&body.request.options);
    let owner = principal.owner();
    let steering = steering(&state, body.agent.as_ref());
    let session = body.request.session_id.clone();
    let asked = SessionEvent::Asked;
    let cwd = body.cwd.clone();
    steer::report(
        &state,
        &steering,
        Some(&session),
        cwd.as_deref(),
        &owner,
        asked,
    )
    .await;
    let (new, base, timeout_secs) = read_call(&state, body, &choices)?;
    let created = state
        .create_generation(GENERATIONS, &base, &owner, new)
        .await;
    let (interaction, attached) = match created {
        Ok(c) => c,
        Err(refused) => return handed_back(refused),
    };
    let waited = state
        .answer(&interaction.id, Duration::from_secs(timeout_secs))
        .await;
    attached.finish();
    let waited = waited?;
    if let Ok(i) = &waited {
        redirect(&state, &steering, &session, i).await;
    }
    let reply = match waited {
        Ok(i) => reply(&i, &choices, state.settings.acp.on_timeout),
        Err(reason) => HookReply::editor(reason),
    };
    Ok(answer(&reply))
}

/// The agent behind `imrelay acp` as steering knows it: named as its `initialize` said.
pub fn steering(state: &Hooks, info: Option<&AgentInfo>) -> steer::Agent {
    let (name, shown) = agent_names(info);
    let settings = &state.settings.acp;
    steer::Agent {
        adapter: AGENT,
        name: name.into(),
        shown: shown.into(),
        delivery: Delivery::TurnEnd,
        on_finish: settings.on_finish,
        finish_wait_secs: settings.finish_wait_secs,
    }
}

/// `POST /v1/hooks/acp/session`: a session's turn, as the proxy saw it ([`super::turns`]).
pub async fn session(
    State(state): State<Hooks>,
    principal: crate::wire::Principal,
    ApiJson(body): ApiJson<TurnBody>,
) -> Result<Response, ApiError> {
    let info = body.agent.as_ref().map(|a| AgentInfo {
        name: a.name.clone(),
        title: a.title.clone(),
        version: None,
    });
    let agent = steering(&state, info.as_ref());
    super::turns::turn(&state, agent, &principal.owner(), body).await
}

/// A deny with words of the person's own: ACP tells the agent only the option chosen, so
/// the words are queued for the session and sent as the next prompt when the turn the deny
/// ended is over (docs/steering.md).
async fn redirect(state: &Hooks, agent: &steer::Agent, session: &str, i: &Interaction) {
    let Some(words) = crate::interaction::deny_instruction(i) else {
        return;
    };
    let call = i.title().unwrap_or(&i.tool_name);
    let text = format!(
        "I denied “{}” (ACP told you only that it was canceled). {words}",
        clip(call, MAX_LABEL_CHARS)
    );
    steer::queue_answer(state, agent, session, &text, i).await;
}

/// A permission request read into the interaction it asks for, the base of its derived id
/// and its deadline in seconds.
fn read_call(
    state: &Hooks,
    body: HookBody,
    choices: &Choices,
) -> Result<(NewInteraction, String, u64), ApiError> {
    let HookBody {
        request,
        cwd,
        agent,
    } = body;
    if request.tool_call.tool_call_id.is_empty() {
        return Err(ValidationError::new(
            "request.toolCall.toolCallId",
            "is required in session/request_permission params",
        )
        .into());
    }
    if !choices.unknown.is_empty() {
        let kinds: Vec<&str> = choices
            .unknown
            .iter()
            .map(|o| o.option_id.as_str())
            .collect();
        tracing::warn!(options = ?kinds, "an ACP agent offered options of a kind imrelay does not know; they are not offered on any channel");
    }
    let (agent_name, shown_agent) = agent_names(agent.as_ref());
    let call = &request.tool_call;
    let (tool, input) = as_claude_code(call);
    let title = call
        .title
        .as_deref()
        .filter(|t| !t.trim().is_empty())
        .map(|t| clip(t, MAX_TEXT_CHARS));
    let base = derived_base(
        "acp",
        &[
            &request.session_id,
            &call.tool_call_id,
            title.as_deref().unwrap_or(""),
        ],
        &input,
    );
    let suggestions = choices.always.as_ref().map(|_| {
        json!([{"type": "addRules", "rules": [{"toolName": tool}], "behavior": "allow",
                "destination": "session"}])
    });
    // The agent waits as long as it takes: the endpoint's own setting is the deadline asked
    // for, within `interactions.max_timeout_secs`.
    let timeout_secs = state
        .registry
        .timeout_for(Kind::Approval, Some(state.settings.acp.timeout_secs.max(1)))?;
    let new = NewInteraction {
        session: Some(clip(&request.session_id, MAX_LABEL_CHARS)).filter(|s| !s.is_empty()),
        agent: Some(agent_name),
        title,
        description: Some(choices.description(&shown_agent)),
        cwd: cwd
            .map(|c| clip(&c, MAX_TEXT_CHARS))
            .filter(|c| !c.is_empty()),
        timeout_secs: Some(timeout_secs),
        suggestions,
        input_fixed: true,
        ..NewInteraction::new(tool, input)
    };
    Ok((new, base, timeout_secs))
}

/// The agent's name as the interaction carries it (`acp` when it gave none) and as the
/// description names it (its title, else that name).
pub fn agent_names(agent: Option<&AgentInfo>) -> (String, String) {
    let name = agent
        .map(|a| a.name.trim())
        .filter(|n| !n.is_empty())
        .map(|n| clip(n, MAX_LABEL_CHARS))
        .unwrap_or_else(|| AGENT.to_string());
    let shown = agent
        .and_then(|a| a.title.as_deref())
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(|t| clip(t, MAX_LABEL_CHARS))
        .unwrap_or_else(|| name.clone());
    (name, shown)
}

/// A request whose interaction was refused for a full pending budget: nobody can be asked,
/// so the editor's own prompt asks. Any other refusal is an API error.
fn handed_back(refused: Refused) -> Result<Response, ApiError> {
    match refused {
        Refused::Full(full) => {
            tracing::warn!(reason = %full, "an ACP permission request was handed to the editor: the pending budget is full");
            Ok(answer(&HookReply::editor(format!(
                "imrelay cannot ask anyone now: {full}"
            ))))
        }
        Refused::Other(e) => Err(e),
    }
}

fn answer(reply: &HookReply) -> Response {
    json_response(StatusCode::OK, reply)
}

/// The reply for a resolved interaction.
fn reply(i: &Interaction, choices: &Choices, on_timeout: OnTimeout) -> HookReply {
    let Some(r) = &i.resolution else {
        return HookReply::editor("No answer through imrelay");
    };
    if r.outcome == Outcome::Expired && on_timeout == OnTimeout::Ask {
        return HookReply::editor(format!(
            "{} through imrelay",
            r.message().unwrap_or("No response")
        ));
    }
    HookReply::outcome(choices.outcome(&r.result))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interaction::Input;

    fn option(id: &str, name: &str, kind: OptionKind) -> PermissionOption {
        PermissionOption {
            option_id: id.into(),
            name: name.into(),
            kind,
        }
    }

    fn gemini() -> Vec<PermissionOption> {
        vec![
            option(
                "proceed_always",
                "Allow for this session",
                OptionKind::AllowAlways,
            ),
            option("proceed_once", "Allow", OptionKind::AllowOnce),
            option("cancel", "Reject", OptionKind::RejectOnce),
        ]
    }

    fn allow(always: bool) -> AgentResult {
        AgentResult::Permission(PermissionResult::Allow {
            updated_input: Input::default(),
            updated_permissions: always.then(|| json!([])),
        })
    }

    fn deny() -> AgentResult {
        AgentResult::Permission(PermissionResult::Deny {
            message: "no".into(),
            interrupt: false,
        })
    }

    fn selected(id: &str) -> PermissionOutcome {
        PermissionOutcome::Selected {
            option_id: id.into(),
        }
    }

    #[test]
    fn answers_map_onto_gemini_clis_options_by_kind() {
        let c = Choices::of(&gemini());
        assert_eq!(c.outcome(&allow(false)), selected("proceed_once"));
        assert_eq!(c.outcome(&allow(true)), selected("proceed_always"));
        assert_eq!(c.outcome(&deny()), selected("cancel"));
        assert_eq!(
            c.description("Gemini CLI"),
            "Allow answers Gemini CLI's “Allow”. Always allow answers “Allow for this session”. \
             Deny answers “Reject”. A reason given with a deny does not reach Gemini CLI: ACP \
             tells it only the option chosen."
        );
    }

    #[test]
    fn always_is_offered_only_beside_a_one_time_allow() {
        // Only a lasting allow: Allow is it, said so, and there is no separate "always".
        let c = Choices::of(&[
            option("always", "Always", OptionKind::AllowAlways),
            option("never", "Never", OptionKind::RejectAlways),
        ]);
        assert_eq!(c.always, None);
        assert_eq!(c.outcome(&allow(true)), selected("always"));
        assert_eq!(c.outcome(&deny()), selected("never"));
        assert!(
            c.description("X")
                .contains("offers no allow for this call alone")
        );
        // No allow at all, and an unknown kind: never chosen, and said so.
        let c = Choices::of(&[
            option("r", "Reject", OptionKind::RejectOnce),
            option("later", "Later", OptionKind::Other),
        ]);
        assert_eq!(c.outcome(&allow(false)), PermissionOutcome::Cancelled);
        assert!(
            c.description("X").contains("“Later”"),
            "{}",
            c.description("X")
        );
        // No reject: a deny is cancelled.
        let c = Choices::of(&[option("a", "Allow", OptionKind::AllowOnce)]);
        assert_eq!(c.outcome(&deny()), PermissionOutcome::Cancelled);
    }
}
