//! `imrelay route`: which route a call would take, read from the configuration alone; and
//! the routes table `imrelay check-config` prints.

use crate::config::Settings;
use crate::interaction::routes::DEFAULT_ROUTE;
use crate::interaction::{Interaction, InteractionId, Kind, now};
use crate::telemetry::escape;

/// A call as `imrelay route` is told of it.
#[derive(Clone, Debug, Default)]
pub struct Call {
    /// The agent's label.
    pub agent: Option<String>,
    /// The tool's name (default `Bash`).
    pub tool: Option<String>,
    /// The working directory.
    pub cwd: Option<String>,
    /// The session label.
    pub session: Option<String>,
    /// Labels the agent sends.
    pub labels: Vec<String>,
}

/// What `imrelay route` prints for `call`: the route's name, what it matched on, where it
/// sends, who may answer and where it escalates.
pub fn explain(settings: &Settings, call: &Call) -> anyhow::Result<String> {
    let teams = settings.teams()?;
    let tool = call.tool.clone().unwrap_or_else(|| "Bash".into());
    let id = InteractionId::parse("route-check")?;
    let mut i = Interaction::pending(id, tool, serde_json::Map::new(), now(), 1);
    i.agent = call.agent.clone().map(Into::into);
    i.cwd = call.cwd.clone().map(Into::into);
    i.session = call.session.clone().map(Into::into);
    i.set_labels(call.labels.iter().map(|l| l.as_str().into()).collect());
    let out = match teams.routes.route_for(&i) {
        Some(r) => {
            let s = r.spec();
            let to: Vec<String> = s
                .targets
                .iter()
                .map(|t| format!("{}:{}", t.channel, t.to))
                .collect();
            format!(
                "route {}\n  sends to: {}\n  approvers: {}\n  timeout: {}\n  escalates: {}\n",
                r.name(),
                if to.is_empty() {
                    "the inbox and the terminal only".into()
                } else {
                    to.join(", ")
                },
                if s.approvers.is_empty() {
                    "the channels' approver lists".to_string()
                } else {
                    s.approvers.join(", ")
                },
                s.timeout_secs
                    .map(|t| format!("{t}s"))
                    .unwrap_or_else(|| "the default".into()),
                crate::config::teams::escalates(s.escalation.as_ref()),
            )
        }
        None if teams.routes.is_empty() => {
            "no routes are configured: every call goes to every configured chat and webhook\n"
                .to_string()
        }
        None => format!(
            "route {DEFAULT_ROUTE} (no configured route matches)\n  sends to: every configured chat and webhook\n  approvers: the channels' approver lists\n"
        ),
    };
    let kind = Kind::of_tool(&i.tool_name);
    let text = format!("{out}  kind: {}\n", kind.as_str());
    Ok(text.lines().map(|l| format!("{}\n", escape(l))).collect())
}

/// The routes table as TOML comments (`# ...`), for `check-config`'s output, which stays
/// valid TOML; empty when no route is configured.
pub fn table_comment(settings: &Settings) -> anyhow::Result<String> {
    let teams = settings.teams()?;
    if teams.routes.is_empty() {
        return Ok(String::new());
    }
    let mut out = String::from("\n# Routes, first match wins:\n");
    for line in crate::config::teams::table(&teams).lines() {
        out.push_str("#   ");
        out.push_str(&escape(line));
        out.push('\n');
    }
    for (route, off) in settings.route_places_off() {
        let line = format!(
            "route {route}: {} turned off, nothing is posted there",
            off.join(", ")
        );
        out.push_str("#   ");
        out.push_str(&escape(&line));
        out.push('\n');
    }
    Ok(out)
}
