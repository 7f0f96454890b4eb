//! OpenCode's own approvals and questions, as its server (`opencode serve`) announces them:
//! what `imrelay bridge opencode` ([`crate::cli::bridge`]) reads and writes (see
//! docs/opencode.md).
//!
//! OpenCode's stable HTTP API (the one its SDK and its own terminal interface use; the
//! `/api/...` routes and `permission.v2.asked` of its v2 API are experimental, and in 1.18 the
//! v2 listing `GET /api/session/{id}/permission` stays empty while a permission waits):
//!
//! - `GET /event`: a server-sent event stream of `{"id", "type", "properties"}`;
//!   `permission.asked` carries `{"id": "per_…", "sessionID", "permission", "patterns",
//!   "metadata", "always", "tool"?}`, `question.asked` carries `{"id": "que_…", "sessionID",
//!   "questions": [{"question", "header", "options": [{"label", "description"}],
//!   "multiple"?, "custom"?}], "tool"?}`; `permission.replied`, `question.replied` and
//!   `question.rejected` carry `{"sessionID", "requestID", ...}` when a request is answered,
//!   wherever that was (OpenCode's own interface, imrelay, a rejection that rejects the
//!   session's other requests too, an "always" that covers them).
//! - `GET /permission`, `GET /question`: the requests waiting now (a list of the `asked`
//!   properties): how pending requests are found again after a reconnect or a restart.
//! - `GET /session/{id}`: the session, with its `directory`.
//! - `POST /permission/{id}/reply` `{"reply": "once" | "always" | "reject", "message"?}`;
//!   `POST /question/{id}/reply` `{"answers": [["label", ...], ...]}` (one list per
//!   question, in order); `POST /question/{id}/reject`. Each answers `true`, also for a
//!   request that is no longer waiting (OpenCode ignores it).
//! - `OPENCODE_SERVER_PASSWORD` on the server: every request needs HTTP Basic
//!   authentication, user `opencode`.
//!
//! Here: reading those events ([`parse_event`]), the interaction each request becomes
//! ([`Request::create_body`], with an id derived from the server and the request id, so a
//! restarted bridge finds the same interaction again), and the reply each outcome becomes
//! ([`Request::reply`]). "Always" in OpenCode lasts as long as the server runs and covers every
//! session of its project, so the approval says exactly that. OpenCode runs the original
//! command whatever an answer says, so the interaction is `input_fixed`: an edited approval
//! is refused where the person makes it.

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::shared::derived_base;
use crate::interaction::{ASK_USER_QUESTION, AgentResult, Interaction, Outcome, PermissionResult};

/// The agent's name on every channel.
pub const AGENT: &str = "opencode";

/// Where the bridge reports each session's turns ([`super::turns`]).
pub const SESSION_PATH: &str = "/v1/hooks/opencode/session";

/// `[hooks.opencode]`: what the sessions behind `imrelay bridge opencode` do when a turn ends.
#[derive(Clone, Debug, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct OpenCodeHookSettings {
    /// What a finished turn does (docs/steering.md): `off`, or `tell` / `ask`: a "finished"
    /// question reaches the session's route, and a reply is sent to OpenCode as the
    /// session's next message (`ask`: when given within `finish_wait_secs`; `tell`: when
    /// the next turn ends).
    pub on_finish: super::steer::OnFinish,
    /// How long the bridge waits for a reply to a finished turn with `on_finish = "ask"`,
    /// seconds.
    pub finish_wait_secs: u64,
}

/// The reason every channel shows when a request was answered in OpenCode itself.
pub const ANSWERED_IN_OPENCODE: &str = "Answered in OpenCode itself";

/// The reason every channel shows when OpenCode no longer waits for a request (its server
/// restarted, or the session was deleted).
pub const GONE_FROM_OPENCODE: &str = "OpenCode no longer waits for this answer";

/// The longest request or session id read (OpenCode's are 30 characters: `per_`, `que_` or
/// `ses_` and 26 more). A longer one is refused where it is read: its reply's URL would be
/// too long for OpenCode (`414`), so imrelay would decide what OpenCode could never be told.
pub const MAX_ID_BYTES: usize = 256;

/// `POST /v1/hooks/opencode/session`: a session's turn, as the bridge saw it
/// ([`super::turns`]).
pub async fn session(
    axum::extract::State(state): axum::extract::State<super::Hooks>,
    principal: crate::wire::Principal,
    crate::wire::extract::ApiJson(body): crate::wire::extract::ApiJson<super::turns::TurnBody>,
) -> Result<axum::response::Response, crate::wire::error::ApiError> {
    let settings = &state.settings.opencode;
    let agent = super::steer::Agent {
        adapter: AGENT,
        name: AGENT.into(),
        shown: "OpenCode".into(),
        delivery: crate::interaction::sessions::Delivery::TurnEnd,
        on_finish: settings.on_finish,
        finish_wait_secs: settings.finish_wait_secs,
    };
    super::turns::turn(&state, agent, &principal.owner(), body).await
}

/// A request OpenCode waits on.
#[derive(Clone, Debug, PartialEq)]
pub enum Request {
    /// `permission.asked`
    Permission(PermissionAsked),
    /// `question.asked`
    Question(QuestionAsked),
}

/// The properties of `permission.asked` that imrelay reads.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PermissionAsked {
    /// `per_…`
    pub id: String,
    /// `ses_…`
    #[serde(rename = "sessionID")]
    pub session_id: String,
    /// What is asked for: `bash`, `edit`, `webfetch`, `external_directory`, ...
    pub permission: String,
    /// What this call touches (the command, the file, ...).
    #[serde(default)]
    pub patterns: Vec<String>,
    /// The tool's details (`command` for `bash`, `filepath` and `diff` for `edit`, ...).
    #[serde(default)]
    pub metadata: Map<String, Value>,
    /// What "always" would allow from now on.
    #[serde(default)]
    pub always: Vec<String>,
}

/// One question of `question.asked`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct OpenCodeQuestion {
    /// The full question.
    pub question: String,
    /// A short label.
    pub header: String,
    /// The choices.
    pub options: Vec<OpenCodeOption>,
    /// Several choices may be taken.
    #[serde(default)]
    pub multiple: Option<bool>,
    /// A typed answer is accepted (OpenCode's default: yes).
    #[serde(default)]
    pub custom: Option<bool>,
}

/// One choice of a question.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct OpenCodeOption {
    /// The label, and the answer OpenCode receives.
    pub label: String,
    /// What it means.
    #[serde(default)]
    pub description: Option<String>,
}

/// The properties of `question.asked` that imrelay reads.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct QuestionAsked {
    /// `que_…`
    pub id: String,
    /// `ses_…`
    #[serde(rename = "sessionID")]
    pub session_id: String,
    /// The questions, answered together.
    pub questions: Vec<OpenCodeQuestion>,
}

/// An event of OpenCode's stream, as far as imrelay cares.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// A request waits for an answer.
    Asked(Request),
    /// The request with this id was answered (anywhere) or rejected.
    Settled {
        /// `per_…` or `que_…`
        request_id: String,
    },
    /// A session is working on a turn (`session.status` with `busy`; said again during the
    /// turn).
    Busy {
        /// `ses_…`
        session_id: String,
    },
    /// A session's turn ended (`session.idle`).
    Idle {
        /// `ses_…`
        session_id: String,
    },
    /// Any other event (`server.connected`, `message.updated`, ...).
    Other,
}

/// Why an event could not be read.
#[derive(Debug, thiserror::Error)]
#[error("{kind}: {message}")]
pub struct EventError {
    /// The event's `type`, or `(unreadable)`.
    pub kind: String,
    /// What was wrong.
    pub message: String,
}

/// Reads one event of `GET /event` (its `data`).
pub fn parse_event(data: &str) -> Result<Event, EventError> {
    #[derive(Deserialize)]
    struct Envelope {
        #[serde(rename = "type")]
        kind: String,
        #[serde(default)]
        properties: Value,
    }
    let env: Envelope = serde_json::from_str(data).map_err(|e| EventError {
        kind: "(unreadable)".into(),
        message: format!("not an OpenCode event: {e}"),
    })?;
    let err = |e: serde_json::Error| EventError {
        kind: env.kind.clone(),
        message: e.to_string(),
    };
    let asked = |r: Request| match r.check() {
        Ok(()) => Ok(Event::Asked(r)),
        Err(message) => Err(EventError {
            kind: env.kind.clone(),
            message,
        }),
    };
    match env.kind.as_str() {
        "permission.asked" => asked(Request::Permission(
            serde_json::from_value(env.properties.clone()).map_err(err)?,
        )),
        "question.asked" => asked(Request::Question(
            serde_json::from_value(env.properties.clone()).map_err(err)?,
        )),
        "permission.replied" | "question.replied" | "question.rejected" => {
            #[derive(Deserialize)]
            struct Settled {
                #[serde(rename = "requestID")]
                request_id: String,
            }
            let s: Settled = serde_json::from_value(env.properties.clone()).map_err(err)?;
            Ok(Event::Settled {
                request_id: s.request_id,
            })
        }
        "session.status" | "session.idle" => Ok(session_event(&env.kind, &env.properties)),
        _ => Ok(Event::Other),
    }
}

/// A `session.status` or `session.idle` event's meaning: a session busy or idle (one whose id
/// no request could carry is no session: [`Event::Other`]).
fn session_event(kind: &str, properties: &Value) -> Event {
    let Some(id) = properties["sessionID"]
        .as_str()
        .filter(|id| !id.is_empty() && id.len() <= MAX_ID_BYTES)
    else {
        return Event::Other;
    };
    let session_id = id.to_string();
    match (kind, properties["status"]["type"].as_str()) {
        ("session.idle", _) => Event::Idle { session_id },
        (_, Some("busy")) => Event::Busy { session_id },
        _ => Event::Other,
    }
}

/// What the bridge sends OpenCode for an outcome.
#[derive(Clone, Debug, PartialEq)]
pub struct Reply {
    /// The path, under the server's URL.
    pub path: String,
    /// The JSON body (`None`: no body).
    pub body: Option<Value>,
}

/// What to do when nobody answered before imrelay's deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum OnTimeout {
    /// Reject the request (OpenCode tells the model nobody answered).
    Reject,
    /// Leave it waiting in OpenCode, for its own interface.
    Leave,
}

impl Request {
    /// Reads one item of `GET /permission` (`question` false) or `GET /question`.
    pub fn from_listing(
        item: &serde_json::value::RawValue,
        question: bool,
    ) -> Result<Self, String> {
        let r = if question {
            serde_json::from_str(item.get()).map(Request::Question)
        } else {
            serde_json::from_str(item.get()).map(Request::Permission)
        }
        .map_err(|e| e.to_string())?;
        r.check()?;
        Ok(r)
    }

    /// Whether its ids are ones the bridge can answer: not empty, at most [`MAX_ID_BYTES`].
    pub fn check(&self) -> Result<(), String> {
        for (what, id) in [("id", self.id()), ("sessionID", self.session_id())] {
            if id.is_empty() {
                return Err(format!("its {what} is empty"));
            }
            if id.len() > MAX_ID_BYTES {
                return Err(format!(
                    "its {what} is {} bytes long, more than an OpenCode id ({MAX_ID_BYTES} at most): \
                     a reply could not reach it",
                    id.len()
                ));
            }
        }
        Ok(())
    }

    /// OpenCode's id (`per_…`, `que_…`).
    pub fn id(&self) -> &str {
        match self {
            Request::Permission(p) => &p.id,
            Request::Question(q) => &q.id,
        }
    }

    /// The session asking.
    pub fn session_id(&self) -> &str {
        match self {
            Request::Permission(p) => &p.session_id,
            Request::Question(q) => &q.session_id,
        }
    }

    /// The interaction id for this request on the server at `server` (its URL): the same
    /// whenever the request is seen again, after a reconnect or a restart of either side.
    pub fn interaction_id(&self, server: &str) -> String {
        derived_base("oc", &[server, self.id()], &Map::new())
    }

    /// The body of `POST /v1/interactions` for this request: the server named `server`, the
    /// session's directory `cwd`, and a deadline of `timeout_secs` if given.
    pub fn create_body(&self, server: &str, cwd: Option<&str>, timeout_secs: Option<u64>) -> Value {
        let mut body = json!({
            "id": self.interaction_id(server),
            "session": self.session_id(),
            "agent": AGENT,
            "title": format!("OpenCode at {server}"),
        });
        if let Some(cwd) = cwd {
            body["cwd"] = json!(cwd);
        }
        if let Some(t) = timeout_secs {
            body["timeout_secs"] = json!(t);
        }
        match self {
            Request::Permission(p) => {
                let (tool, input) = permission_tool(p);
                body["tool_name"] = json!(tool);
                body["input"] = Value::Object(input);
                body["input_fixed"] = json!(true);
                if !p.always.is_empty() {
                    body["description"] = json!(always_label(p));
                    // "Always allow" on the channels; the rules are OpenCode's own `always`
                    // patterns, for as long as its process runs (hence `cliArg`).
                    let rules: Vec<Value> = p
                        .always
                        .iter()
                        .map(|a| json!({"toolName": p.permission, "ruleContent": a}))
                        .collect();
                    body["suggestions"] = json!([{
                        "type": "addRules", "rules": rules, "behavior": "allow",
                        "destination": "cliArg",
                    }]);
                }
            }
            Request::Question(q) => {
                body["kind"] = json!("question");
                body["tool_name"] = json!(ASK_USER_QUESTION);
                let questions: Vec<Value> = q
                    .questions
                    .iter()
                    .map(|q| {
                        let options: Vec<Value> = q
                            .options
                            .iter()
                            .map(|o| json!({"label": o.label, "description": o.description}))
                            .collect();
                        json!({"question": q.question, "header": q.header, "options": options,
                            "multiSelect": q.multiple.unwrap_or(false)})
                    })
                    .collect();
                body["input"] = json!({ "questions": questions });
                if q.questions.iter().any(|q| q.custom == Some(false)) {
                    body["description"] = json!(
                        "OpenCode asked for one of the listed answers: an answer typed under \"Other\" still reaches it, as typed."
                    );
                }
            }
        }
        body
    }

    /// What OpenCode is sent for the resolved interaction `i`; `None` leaves the request to
    /// OpenCode's own interface (withdrawn, or expired with [`OnTimeout::Leave`]).
    pub fn reply(&self, i: &Interaction, on_timeout: OnTimeout) -> Option<Reply> {
        let r = i.resolution.as_ref()?;
        let reject = |message: Option<String>| match self {
            Request::Permission(p) => Some(Reply {
                path: format!("/permission/{}/reply", segment(&p.id)),
                body: Some(match message.filter(|m| !m.trim().is_empty()) {
                    Some(m) => json!({"reply": "reject", "message": m}),
                    None => json!({"reply": "reject"}),
                }),
            }),
            Request::Question(q) => Some(Reply {
                path: format!("/question/{}/reject", segment(&q.id)),
                body: None,
            }),
        };
        match r.outcome {
            Outcome::Cancelled => return None,
            Outcome::Expired => {
                return match on_timeout {
                    OnTimeout::Leave => None,
                    OnTimeout::Reject => {
                        reject(Some("Nobody answered through imrelay in time".into()))
                    }
                };
            }
            _ => {}
        }
        match (&r.result, self) {
            (
                AgentResult::Permission(PermissionResult::Allow {
                    updated_permissions,
                    ..
                }),
                Request::Permission(p),
            ) => {
                let reply = if updated_permissions.is_some() {
                    "always"
                } else {
                    "once"
                };
                Some(Reply {
                    path: format!("/permission/{}/reply", segment(&p.id)),
                    body: Some(json!({ "reply": reply })),
                })
            }
            (
                AgentResult::Permission(PermissionResult::Allow { updated_input, .. }),
                Request::Question(q),
            ) => {
                let input: Value = serde_json::from_str(updated_input.as_json()).ok()?;
                let answers = &input["answers"];
                let lists: Vec<Vec<String>> = q
                    .questions
                    .iter()
                    .map(|q| labels_of(q, answers[&q.question].as_str().unwrap_or("")))
                    .collect();
                Some(Reply {
                    path: format!("/question/{}/reply", segment(&q.id)),
                    body: Some(json!({ "answers": lists })),
                })
            }
            (AgentResult::Permission(PermissionResult::Deny { message, .. }), _) => {
                reject(Some(message.clone()))
            }
            (AgentResult::Elicit(_), _) => None,
        }
    }
}

/// An approval's tool and input as the rest of imrelay reads them: OpenCode's `bash` is
/// Claude Code's `Bash` (`command`, and `description` when OpenCode gives one); any other
/// permission keeps its name, with its `patterns` and `metadata` shown field by field.
fn permission_tool(p: &PermissionAsked) -> (String, Map<String, Value>) {
    if p.permission == "bash"
        && let Some(Value::String(command)) = p.metadata.get("command")
    {
        let mut input = Map::new();
        input.insert("command".into(), json!(command));
        if let Some(Value::String(d)) = p.metadata.get("description") {
            input.insert("description".into(), json!(d));
        }
        return ("Bash".into(), input);
    }
    let mut input = p.metadata.clone();
    input.insert("patterns".into(), json!(p.patterns));
    (p.permission.clone(), input)
}

/// What "always" allows, said on every channel: OpenCode keeps it while its server runs, for
/// every session, not only this one.
fn always_label(p: &PermissionAsked) -> String {
    let patterns: Vec<String> = p.always.iter().map(|a| format!("`{a}`")).collect();
    format!(
        "Always allow lets OpenCode run {} matching {} without asking again, in every session, for as long as this OpenCode server runs (not only this session).",
        p.permission,
        patterns.join(", ")
    )
}

/// One question's answer (a label, `", "`-joined labels, or typed text) as OpenCode's list
/// of labels: the labels it names, and what remains as one typed answer.
fn labels_of(q: &OpenCodeQuestion, answer: &str) -> Vec<String> {
    let answer = answer.trim();
    if answer.is_empty() {
        return Vec::new();
    }
    let is_label = |s: &str| q.options.iter().any(|o| o.label == s);
    if is_label(answer) || !q.multiple.unwrap_or(false) {
        return vec![answer.to_string()];
    }
    let (labels, typed): (Vec<&str>, Vec<&str>) = answer.split(", ").partition(|s| is_label(s));
    let mut out: Vec<String> = labels.into_iter().map(str::to_string).collect();
    if !typed.is_empty() {
        out.push(typed.join(", "));
    }
    out
}

/// `s` as one URL path segment (OpenCode's ids are letters, digits and `_`; anything else is
/// percent-encoded, so an id never reaches another path).
pub fn segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) && s != "." && s != ".." {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str, kind: &str) -> String {
        let path = format!(
            "{}/tests/fixtures/opencode/{name}.jsonl",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(&path).unwrap();
        text.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .map(|l| l["event"].clone())
            .find(|e| e["type"] == kind)
            .unwrap()
            .to_string()
    }

    #[test]
    fn captured_events_are_read() {
        let Event::Asked(Request::Permission(p)) =
            parse_event(&fixture("server_permission_once", "permission.asked")).unwrap()
        else {
            panic!("not a permission");
        };
        assert_eq!(p.permission, "bash");
        assert_eq!(p.always, vec!["echo *".to_string()]);
        let (tool, input) = permission_tool(&p);
        assert_eq!(tool, "Bash");
        assert_eq!(input["command"], "echo ok > oc-proof.txt");
        let Event::Asked(Request::Question(q)) =
            parse_event(&fixture("server_question_reply", "question.asked")).unwrap()
        else {
            panic!("not a question");
        };
        assert_eq!(q.questions[0].options.len(), 2);
        for (name, kind) in [
            ("server_permission_once", "permission.replied"),
            ("server_question_reply", "question.replied"),
            ("server_question_reject", "question.rejected"),
        ] {
            assert!(matches!(
                parse_event(&fixture(name, kind)).unwrap(),
                Event::Settled { .. }
            ));
        }
        assert_eq!(
            parse_event(r#"{"type":"server.connected","properties":{}}"#).unwrap(),
            Event::Other
        );
        let busy = fixture("server_permission_once", "session.status");
        let Event::Busy { session_id } = parse_event(&busy).unwrap() else {
            panic!("not busy: {busy}");
        };
        assert!(session_id.starts_with("ses_"), "{session_id}");
        let idle = fixture("server_permission_once", "session.idle");
        assert_eq!(parse_event(&idle).unwrap(), Event::Idle { session_id });
        let idle_status = r#"{"type":"session.status","properties":{"sessionID":"ses_1","status":{"type":"idle"}}}"#;
        assert_eq!(parse_event(idle_status).unwrap(), Event::Other);
    }

    #[test]
    fn malformed_events_are_errors_naming_the_event() {
        assert!(parse_event("not json").is_err());
        let e = parse_event(r#"{"type":"permission.asked","properties":{"id":5}}"#).unwrap_err();
        assert_eq!(e.kind, "permission.asked");
    }

    #[test]
    fn ids_no_reply_could_reach_are_refused() {
        let asked = |id: &str, session: &str| {
            serde_json::json!({"type": "permission.asked", "properties": {"id": id,
                "sessionID": session, "permission": "bash"}})
            .to_string()
        };
        assert!(parse_event(&asked("per_1", "ses_1")).is_ok());
        let long = "p".repeat(MAX_ID_BYTES + 1);
        let e = parse_event(&asked(&long, "ses_1")).unwrap_err();
        assert!(e.message.contains("more than an OpenCode id"), "{e}");
        assert!(parse_event(&asked("per_1", &long)).is_err());
        assert!(parse_event(&asked("", "ses_1")).is_err());
        let item = serde_json::value::RawValue::from_string(
            serde_json::json!({"id": long, "sessionID": "s", "permission": "bash"}).to_string(),
        )
        .unwrap();
        assert!(Request::from_listing(&item, false).is_err());
    }

    #[test]
    fn typed_and_chosen_answers_become_label_lists() {
        let q = OpenCodeQuestion {
            question: "Which?".into(),
            header: "H".into(),
            options: vec![
                OpenCodeOption {
                    label: "A, B".into(),
                    description: None,
                },
                OpenCodeOption {
                    label: "C".into(),
                    description: None,
                },
            ],
            multiple: Some(true),
            custom: None,
        };
        assert_eq!(labels_of(&q, "A, B"), vec!["A, B"]);
        assert_eq!(labels_of(&q, "C, my own"), vec!["C", "my own"]);
        let single = OpenCodeQuestion {
            multiple: None,
            ..q
        };
        assert_eq!(labels_of(&single, "C, D"), vec!["C, D"]);
    }
}
