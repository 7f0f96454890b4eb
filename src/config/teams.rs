//! `[[people]]`, `[[groups]]` and `[[routes]]`: read and checked here, compiled into the
//! core's [`Teams`]. A person's ids and a route's places are listed under each channel's
//! name (`telegram = [42]`, `slack = ["C0123"]`); which names exist, how each id is written,
//! which places each channel is configured with and how a person is messaged directly are
//! the channels' own to say (the registry, [`crate::channels::Channel`]), so nothing here
//! names a channel. A route's people and groups must exist, and a person it messages
//! directly must have an id to message; everything is checked at start-up and by
//! `imrelay check-config`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::interaction::Kind;
use crate::interaction::Teams;
use crate::interaction::people::{GroupSpec, Identity, People, Person, PersonSpec};
use crate::interaction::quiet::QuietHours;
use crate::interaction::routes::{Escalation, RouteSpec, Routes, Target};

use super::Settings;
use crate::channels::{Channel, Written};

/// Ids or places listed under each channel's key (`telegram = [42]`, `slack = ["C0123"]`).
pub type PerChannel = BTreeMap<String, Vec<Written>>;

/// `list` as written ids or places: `written(vec![42])`, `written(vec!["C0123"])`.
pub fn written<W: Into<Written>>(list: Vec<W>) -> Vec<Written> {
    list.into_iter().map(Into::into).collect()
}

/// The channel name of operator identities (an operator token's label, for the inbox and
/// the terminal).
pub const OPERATOR: &str = "operator";

/// One `[[people]]` table.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct PersonSettings {
    /// The name answers and refusals are recorded under.
    pub name: String,
    /// Labels of operator tokens (the inbox, the terminal).
    #[serde(default)]
    pub operator: Vec<String>,
    /// Groups they belong to.
    #[serde(default)]
    pub groups: Vec<String>,
    /// Their quiet hours, `"HH:MM-HH:MM"` (`"22:00-07:00"`): phone notifications (Web Push,
    /// ntfy, direct messages on chat channels) wait until they end. Empty: none.
    #[serde(default)]
    pub quiet: String,
    /// The time zone of `quiet` (an IANA name, `"Europe/Berlin"`); empty: the server's.
    #[serde(default)]
    pub time_zone: String,
    /// Their ids on each channel, under the channel's name (`telegram = [42]`,
    /// `feishu = ["ou_..."]`, `webhook = ["sender"]`).
    #[serde(flatten)]
    pub ids: PerChannel,
}

impl PersonSettings {
    /// A person called `name` with no ids yet.
    pub fn named(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            ..Self::default()
        }
    }

    /// With `ids` on the channel called `channel`.
    pub fn on<W: Into<Written>>(mut self, channel: &str, ids: impl IntoIterator<Item = W>) -> Self {
        self.ids
            .entry(channel.to_string())
            .or_default()
            .extend(ids.into_iter().map(Into::into));
        self
    }
}

/// One `[[groups]]` table.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct GroupSettings {
    /// The group's name.
    pub name: String,
    /// The names of the people in it.
    #[serde(default)]
    pub members: Vec<String>,
}

/// One `[[routes]]` table.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct RouteSettings {
    /// The route's name: on every copy, in filters and in the audit trail.
    pub name: String,
    /// Only calls from these agents (globs over the agent's label); empty: any.
    #[serde(default, deserialize_with = "crate::settings::one_or_many")]
    pub agent: Vec<String>,
    /// Only calls of these sessions (globs); empty: any.
    #[serde(default, deserialize_with = "crate::settings::one_or_many")]
    pub session: Vec<String>,
    /// Only calls whose working directory matches one of these absolute globs; empty: any.
    #[serde(default, deserialize_with = "crate::settings::one_or_many")]
    pub cwd: Vec<String>,
    /// Only calls of these tools (globs over the tool's name: `Bash`, `mcp__github__*`);
    /// empty: any.
    #[serde(
        default,
        alias = "tools",
        deserialize_with = "crate::settings::one_or_many"
    )]
    pub tool: Vec<String>,
    /// Only interactions of these kinds (`approval`, `question`, `form`); empty: every kind.
    #[serde(default, deserialize_with = "crate::settings::one_or_many")]
    pub kind: Vec<Kind>,
    /// Only interactions carrying every one of these labels; empty: any.
    #[serde(default, deserialize_with = "crate::settings::one_or_many")]
    pub labels: Vec<String>,
    /// The places it posts to, under each channel's name (`telegram = [-1001]`,
    /// `slack = ["C0123"]`, `webhooks = ["ci"]`): each listed in that channel's section.
    #[serde(flatten)]
    pub places: PerChannel,
    /// People it messages directly, on every chat channel they have an id on.
    #[serde(default, deserialize_with = "crate::settings::one_or_many")]
    pub direct: Vec<String>,
    /// People and groups who may answer; empty: the channels' approver lists.
    #[serde(default, deserialize_with = "crate::settings::one_or_many")]
    pub approvers: Vec<String>,
    /// The longest its interactions wait, and their timeout when the agent asks none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_secs: Option<u64>,
    /// How many different people must allow its approvals (the two-person rule: 2);
    /// unset: one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quorum: Option<u32>,
    /// With `quorum`: how many different people's denies deny; unset: one deny denies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deny_quorum: Option<u32>,
    /// Seconds after which an unanswered interaction escalates to `escalate_to`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalate_after_secs: Option<u64>,
    /// Where it escalates to, and who may answer it from then on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalate_to: Option<EscalateTo>,
    /// What a finished turn of the sessions that take this route does (`off`, `tell`,
    /// `ask`); unset: the agent's `[hooks.*] on_finish`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_finish: Option<crate::interaction::sessions::OnFinish>,
    /// How long `on_finish = "ask"` holds the agent for a reply, seconds; unset: the
    /// agent's `[hooks.*] finish_wait_secs`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_wait_secs: Option<u64>,
    /// An answer counts only with a passkey assertion made in the inbox (see docs/phone.md).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub step_up: bool,
    /// "Desk first": while one of its approvers is at the inbox or `imrelay watch`, the phone
    /// copies wait this many seconds (never past the deadline); unset: sent at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desk_first_secs: Option<u64>,
    /// With `desk_first_secs`: the chat copies (groups, channels) wait too.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub desk_first_chats: bool,
}

/// A route's `escalate_to`: more places to post an unanswered interaction to (chats,
/// receivers, Slack channels, webhooks, people's direct messages) and more people who may
/// answer it. The first copies stay live.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct EscalateTo {
    /// More places to post to, under each channel's name, as in a route.
    #[serde(flatten)]
    pub places: PerChannel,
    /// People to message directly, on every chat channel they have an id on.
    #[serde(default)]
    pub direct: Vec<String>,
    /// People and groups who may answer too, from the escalation on.
    #[serde(default)]
    pub approvers: Vec<String>,
    /// Whether the escalation's notifications reach phones (Web Push, ntfy, direct
    /// messages) in their people's quiet hours.
    #[serde(default)]
    pub through_quiet: bool,
}

/// The places a route (or its escalation) names, as configured.
struct Places<'a> {
    listed: &'a PerChannel,
    direct: &'a [String],
    /// What lists them, and its other settings (for a key that is neither).
    fields: (&'static str, &'static [&'static str]),
}

impl RouteSettings {
    fn places(&self) -> Places<'_> {
        Places {
            listed: &self.places,
            direct: &self.direct,
            fields: ("[[routes]]", ROUTE_FIELDS),
        }
    }
}

impl EscalateTo {
    fn places(&self) -> Places<'_> {
        Places {
            listed: &self.places,
            direct: &self.direct,
            fields: ("escalate_to", ESCALATION_FIELDS),
        }
    }
}

/// The settings of a `[[routes]]` entry besides its places, for a key that is neither.
const ROUTE_FIELDS: &[&str] = &[
    "name",
    "agent",
    "session",
    "cwd",
    "tool",
    "kind",
    "labels",
    "direct",
    "approvers",
    "timeout_secs",
    "quorum",
    "deny_quorum",
    "escalate_after_secs",
    "escalate_to",
    "step_up",
    "desk_first_secs",
    "desk_first_chats",
];

/// The settings of a route's `escalate_to` besides its places.
const ESCALATION_FIELDS: &[&str] = &["direct", "approvers", "through_quiet"];

/// The settings of a `[[people]]` entry besides its ids.
const PERSON_FIELDS: &[&str] = &["name", "operator", "groups", "quiet", "time_zone"];

/// The channel whose `key` (its route or person key) is `key`, or an error saying it is
/// neither a channel nor one of `fields` (the other settings of `what`), with the nearest.
fn channel<'s>(
    s: &'s Settings,
    key: &str,
    of: fn(&dyn Channel) -> &'static str,
    (what, fields): (&str, &[&str]),
) -> Result<&'s dyn Channel, String> {
    s.channels()
        .into_iter()
        .find(|c| of(*c) == key)
        .ok_or_else(|| {
            let names: Vec<&str> = s.channels().iter().map(|c| of(*c)).collect();
            let near = fields
                .iter()
                .chain(&names)
                .map(|n| (strsim::jaro_winkler(key, n), *n))
                .filter(|(score, _)| *score >= 0.8)
                .max_by(|a, b| a.0.total_cmp(&b.0))
                .map(|(_, n)| n);
            match near {
                Some(n) => format!(
                    "`{key}` is neither a setting of {what} nor a channel: did you mean `{n}`?"
                ),
                None => format!(
                    "`{key}` is neither a setting of {what} ({}) nor a channel ({}): check the \
                     spelling",
                    fields.join(", "),
                    names.join(", ")
                ),
            }
        })
}

impl PersonSettings {
    fn spec(&self, s: &Settings, k: usize) -> Result<PersonSpec, String> {
        let at = |f: &str| format!("people[{k}] ({:?}).{f}", self.name);
        let mut identities = Vec::new();
        for (key, ids) in &self.ids {
            let c = channel(s, key, |c| c.person_key(), ("[[people]]", PERSON_FIELDS))
                .map_err(|e| format!("{}: {e}", at(key)))?;
            for (j, id) in ids.iter().enumerate() {
                let id = c
                    .person_id(id)
                    .map_err(|e| format!("{}: {e}", at(&format!("{key}[{j}]"))))?;
                identities.push(Identity::new(c.name(), id));
            }
        }
        identities.extend(
            self.operator
                .iter()
                .map(|id| Identity::new(OPERATOR, id.clone())),
        );
        let quiet = match (self.quiet.trim(), self.time_zone.trim()) {
            ("", "") => None,
            ("", _) => {
                return Err(format!(
                    "{}: a time zone without quiet hours: add quiet = \"22:00-07:00\" (the hours \
                     phone notifications wait), or remove time_zone",
                    at("time_zone")
                ));
            }
            (span, zone) => {
                Some(QuietHours::parse(span, zone).map_err(|e| format!("{}: {e}", at("quiet")))?)
            }
        };
        Ok(PersonSpec {
            name: self.name.clone(),
            identities,
            groups: self.groups.clone(),
            quiet,
        })
    }
}

/// The addresses `p` names, each checked against the channels' settings; `at` names a
/// field in errors.
fn targets(
    s: &Settings,
    people: &People,
    p: &Places<'_>,
    at: &dyn Fn(&str) -> String,
) -> Result<Vec<Target>, String> {
    let mut targets = listed_targets(s, p, at)?;
    for (j, name) in p.direct.iter().enumerate() {
        let Some(p) = people.person(name) else {
            return Err(format!(
                "{}: {name:?} is not a person: add a [[people]] entry with this name",
                at(&format!("direct[{j}]"))
            ));
        };
        let direct = direct_targets(s, p);
        if direct.is_empty() {
            let chats: Vec<&str> = s
                .channels()
                .iter()
                .filter(|c| c.is_chat())
                .map(|c| c.name())
                .collect();
            return Err(format!(
                "{}: {name:?} has no id on an enabled chat channel ({}) to message",
                at(&format!("direct[{j}]")),
                chats.join(", ")
            ));
        }
        targets.extend(direct);
    }
    targets.sort();
    targets.dedup();
    Ok(targets)
}

/// The places `p` lists on each channel, each checked against that channel's settings;
/// `at` names a field in errors.
fn listed_targets(
    s: &Settings,
    p: &Places<'_>,
    at: &dyn Fn(&str) -> String,
) -> Result<Vec<Target>, String> {
    let mut targets = Vec::new();
    for (key, places) in p.listed {
        let c = channel(s, key, |c| c.route_key(), p.fields)
            .map_err(|e| format!("{}: {e}", at(key)))?;
        let configured = c.places();
        for (j, place) in places.iter().enumerate() {
            let at = || at(&format!("{key}[{j}]"));
            let place = c.place(place).map_err(|e| format!("{}: {e}", at()))?;
            if !configured.contains(&place) {
                return Err(format!("{}: {}", at(), c.unlisted(&place)));
            }
            targets.push(Target::new(c.name(), place));
        }
    }
    Ok(targets)
}

/// Where to message `p` directly: their ids on every enabled chat channel.
fn direct_targets(s: &Settings, p: &Person) -> Vec<Target> {
    let mut targets = Vec::new();
    for c in s.channels() {
        if c.enabled() && c.is_chat() {
            targets.extend(
                p.ids_on(c.name())
                    .filter_map(|id| c.direct(id))
                    .map(|to| Target::new(c.name(), to)),
            );
        }
    }
    targets
}

/// A route's escalation, checked: both `escalate_after_secs` and `escalate_to`, or neither.
fn escalation(
    s: &Settings,
    people: &People,
    r: &RouteSettings,
    at: &dyn Fn(&str) -> String,
) -> Result<Option<Escalation>, String> {
    match (r.escalate_after_secs, &r.escalate_to) {
        (None, None) => Ok(None),
        (Some(_), None) => Err(format!(
            "{}: escalate_after_secs needs escalate_to (where to escalate: chats, receivers, channels, webhooks, direct, approvers)",
            at("escalate_after_secs")
        )),
        (None, Some(_)) => Err(format!(
            "{}: escalate_to needs escalate_after_secs (how long nobody answered before it escalates)",
            at("escalate_to")
        )),
        (Some(after_secs), Some(to)) => {
            let at = |f: &str| at(&format!("escalate_to.{f}"));
            Ok(Some(Escalation {
                after_secs,
                targets: targets(s, people, &to.places(), &at)?,
                approvers: to.approvers.clone(),
                through_quiet: to.through_quiet,
            }))
        }
    }
}

/// The people and groups, checked; every operator label a person lists must be the label
/// of an operator token.
pub fn people(s: &Settings) -> Result<People, String> {
    for (k, p) in s.people.iter().enumerate() {
        for (j, label) in p.operator.iter().enumerate() {
            if !s.auth.operator_labels().any(|l| l == label) {
                return Err(format!(
                    "people[{k}] ({:?}).operator[{j}]: {label:?} is not the label of an \
                     auth.operator_tokens entry: label their token \
                     ({{ token = \"...\", label = {label:?} }}), or remove it here",
                    p.name
                ));
            }
        }
    }
    let specs = s
        .people
        .iter()
        .enumerate()
        .map(|(k, p)| p.spec(s, k))
        .collect::<Result<Vec<_>, _>>()?;
    People::new(
        specs,
        s.groups
            .iter()
            .map(|g| GroupSpec {
                name: g.name.clone(),
                members: g.members.clone(),
            })
            .collect(),
    )
    .map_err(|e| e.to_string())
}

/// The people, groups and routes, checked against each other and against the channels'
/// settings; the error names the entry, the field and the fix.
pub fn compile(s: &Settings) -> Result<Teams, String> {
    let people = people(s)?;
    let mut specs = Vec::with_capacity(s.routes.len());
    for (k, r) in s.routes.iter().enumerate() {
        let at = |f: &str| format!("routes[{k}] ({:?}).{f}", r.name);
        let targets = targets(s, &people, &r.places(), &at)?;
        let escalation = escalation(s, &people, r, &at)?;
        specs.push(RouteSpec {
            name: r.name.clone(),
            agents: r.agent.clone(),
            sessions: r.session.clone(),
            cwds: r.cwd.clone(),
            tools: r.tool.clone(),
            kinds: r.kind.clone(),
            labels: r.labels.clone(),
            targets,
            approvers: r.approvers.clone(),
            timeout_secs: r.timeout_secs,
            quorum: r.quorum,
            deny_quorum: r.deny_quorum,
            escalation,
            on_finish: r.on_finish,
            finish_wait_secs: r.finish_wait_secs,
            step_up: r.step_up,
            desk_first_secs: r.desk_first_secs,
            desk_first_chats: r.desk_first_chats,
        });
    }
    let routes = Routes::new(specs, &people).map_err(|e| e.to_string())?;
    for (k, rule) in s.policy.iter().enumerate() {
        for (j, r) in rule.route.iter().enumerate() {
            if r != crate::interaction::routes::DEFAULT_ROUTE && routes.get(r).is_none() {
                return Err(format!(
                    "policy[{k}] ({:?}).route[{j}]: {r:?} is not the name of a [[routes]] entry (nor \"default\")",
                    rule.name
                ));
            }
        }
    }
    Ok(Teams { people, routes })
}

/// Settings that are valid but probably not what was meant, knowing the routes: a chat
/// channel nobody may answer on (its own approver list empty, and no route's approver has
/// an id there), and a route whose approvers have no id on a chat channel it sends to.
pub fn warnings(s: &Settings) -> Vec<String> {
    // Invalid teams are refused by validation, which says why.
    let teams = compile(s).unwrap_or_default();
    let ids_on = |approvers: &[String], channel: &str| -> Vec<String> {
        let Ok(a) = teams.people.expand(approvers) else {
            return Vec::new();
        };
        a.names()
            .filter_map(|n| teams.people.person(n))
            .filter(|p| p.ids_on(channel).next().is_some())
            .map(|p| p.name().to_string())
            .collect()
    };
    let routed = |channel: &str| {
        teams
            .routes
            .routes()
            .iter()
            .any(|r| !ids_on(&r.spec().approvers, channel).is_empty())
    };
    let mut out = Vec::new();
    for c in s.channels() {
        if !(c.is_chat() && routed(c.name())) {
            out.extend(c.nobody_answers());
        }
        out.extend(c.warnings());
    }
    let chat = |name: &str| s.channels().iter().any(|c| c.is_chat() && c.name() == name);
    for r in teams.routes.routes() {
        let spec = r.spec();
        if spec.approvers.is_empty() {
            continue;
        }
        let mut channels: Vec<&str> = spec
            .targets
            .iter()
            .map(|t| t.channel.as_str())
            .filter(|c| chat(c))
            .collect();
        channels.dedup();
        for channel in channels {
            if ids_on(&spec.approvers, channel).is_empty() {
                out.push(format!(
                    "route {:?} sends to {channel}, but none of its approvers ({}) has a \
                     {channel} id in [[people]]: nobody can answer it there (add their ids, \
                     e.g. {channel} = [...] on a person)",
                    r.name(),
                    spec.approvers.join(", ")
                ));
            }
        }
    }
    out
}

/// A route's escalation as the routes table shows it: `after 300s to telegram:-1002,
/// approvers leads`, or `never`.
pub fn escalates(e: Option<&Escalation>) -> String {
    let Some(e) = e else {
        return "never".into();
    };
    let mut out = format!("after {}s", e.after_secs);
    if !e.targets.is_empty() {
        let to: Vec<String> = e
            .targets
            .iter()
            .map(|t| format!("{}:{}", t.channel, t.to))
            .collect();
        out.push_str(&format!(" to {}", to.join(", ")));
    }
    if !e.approvers.is_empty() {
        out.push_str(&format!("; approvers {}", e.approvers.join(", ")));
    }
    out
}

/// The routes as a table, for `imrelay check-config`: one row per route, the implicit last
/// one included. Values are as configured: escape them for a terminal.
pub fn table(teams: &Teams) -> String {
    let mut rows = vec![[
        "route".to_string(),
        "matches".to_string(),
        "sends to".to_string(),
        "approvers".to_string(),
        "timeout".to_string(),
        "escalates".to_string(),
    ]];
    for r in teams.routes.routes() {
        let s = r.spec();
        let mut m = Vec::new();
        let mut add = |k: &str, v: &[String]| {
            if !v.is_empty() {
                m.push(format!("{k}={}", v.join("|")));
            }
        };
        add("agent", &s.agents);
        add("session", &s.sessions);
        add("cwd", &s.cwds);
        add("tool", &s.tools);
        add(
            "kind",
            &s.kinds
                .iter()
                .map(|k| k.as_str().to_string())
                .collect::<Vec<_>>(),
        );
        add("labels", &s.labels);
        let to: Vec<String> = s
            .targets
            .iter()
            .map(|t| format!("{}:{}", t.channel, t.to))
            .collect();
        rows.push([
            r.name().to_string(),
            if m.is_empty() {
                "everything".into()
            } else {
                m.join(" ")
            },
            if to.is_empty() {
                "inbox and terminal only".into()
            } else {
                to.join(", ")
            },
            if s.approvers.is_empty() {
                "channel lists".into()
            } else {
                s.approvers.join(", ")
            },
            s.timeout_secs
                .map(|t| format!("{t}s"))
                .unwrap_or_else(|| "default".into()),
            escalates(s.escalation.as_ref()),
        ]);
    }
    rows.push([
        crate::interaction::routes::DEFAULT_ROUTE.to_string(),
        "everything else".into(),
        "every configured chat and webhook".into(),
        "channel lists".into(),
        "default".into(),
        "never".into(),
    ]);
    let widths: Vec<usize> = (0..6)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in &rows {
        let line: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(v, w)| format!("{v:<w$}"))
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct File {
        #[serde(default)]
        people: Vec<PersonSettings>,
        #[serde(default)]
        groups: Vec<GroupSettings>,
        #[serde(default)]
        routes: Vec<RouteSettings>,
    }

    /// The defaults with Telegram on two chats, Feishu on one receiver, a webhook, alice and
    /// bob, and `routes`.
    fn settings(routes: &str) -> Settings {
        let mut s = Settings::load_with_env(None, Some(Default::default())).unwrap();
        s.telegram.enabled = true;
        s.telegram.chats = vec![-1001, -1002];
        s.feishu.enabled = true;
        s.feishu.receivers = vec!["chat_id:oc_1".parse().unwrap()];
        s.webhooks = toml::from_str::<toml::Table>(
            "[[webhooks]]\nname = \"pager\"\nurl = \"https://example.com/hook\"\nsecret = \"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\"",
        )
        .unwrap()["webhooks"]
            .clone()
            .try_into()
            .unwrap();
        let f: File = toml::from_str(&format!(
            "[[people]]\nname = \"alice\"\ntelegram = [111]\ngroups = [\"web\"]\n\
             [[people]]\nname = \"bob\"\nfeishu = [\"ou_b\"]\nslack = [\"U2\"]\n{routes}"
        ))
        .unwrap();
        s.people = f.people;
        s.groups = f.groups;
        s.routes = f.routes;
        s
    }

    #[test]
    fn routes_compile_with_their_targets_and_show_as_a_table() {
        let s = settings(
            r#"
[[routes]]
name = "shop"
cwd = ["/srv/shop/**"]
telegram = [-1001]
webhooks = ["pager"]
direct = ["bob"]
approvers = ["web", "bob"]
timeout_secs = 600
"#,
        );
        let t = compile(&s).unwrap();
        let r = t.routes.get("shop").unwrap();
        let to: Vec<String> = r
            .spec()
            .targets
            .iter()
            .map(|t| format!("{}:{}", t.channel, t.to))
            .collect();
        // Bob's direct messages: Feishu (on), not Slack (off).
        assert_eq!(
            to,
            ["feishu:open_id:ou_b", "telegram:-1001", "webhook:pager"]
        );
        let table = table(&t);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 3, "{table}");
        assert!(lines[0].starts_with("route "), "{table}");
        assert!(lines[1].starts_with("shop "), "{table}");
        assert!(lines[1].contains("cwd=/srv/shop/**"), "{table}");
        assert!(
            lines[1].contains("web, bob")
                && lines[1].contains("600s")
                && lines[1].ends_with("never"),
            "{table}"
        );
        assert!(lines[2].starts_with("default "), "{table}");
    }

    #[test]
    fn warnings_know_that_routes_name_approvers() {
        // Telegram's own list is empty; Feishu's too.
        let mut s = settings("");
        s.telegram.approvers.clear();
        s.feishu.approvers.clear();
        let w = warnings(&s).join("\n");
        assert!(w.contains("telegram.approvers is empty"), "{w}");
        assert!(w.contains("feishu.approvers is empty"), "{w}");
        // A route whose approver (alice) has a Telegram id: Telegram can be answered on.
        let mut s = settings(
            "[[routes]]\nname = \"shop\"\ncwd = [\"/srv/shop/**\"]\ntelegram = [-1001]\napprovers = [\"alice\"]",
        );
        s.telegram.approvers.clear();
        s.feishu.approvers.clear();
        let w = warnings(&s).join("\n");
        assert!(!w.contains("telegram.approvers is empty"), "{w}");
        assert!(w.contains("feishu.approvers is empty"), "{w}");
        // A route to a chat where none of its approvers has an id: said, naming both.
        let s = settings(
            "[[routes]]\nname = \"data\"\nfeishu = [\"chat_id:oc_1\"]\napprovers = [\"alice\"]",
        );
        let w = warnings(&s).join("\n");
        assert!(
            w.contains(
                "route \"data\" sends to feishu, but none of its approvers (alice) has a feishu id"
            ),
            "{w}"
        );
        // Bob has one: no warning.
        let s = settings(
            "[[routes]]\nname = \"data\"\nfeishu = [\"chat_id:oc_1\"]\napprovers = [\"alice\", \"bob\"]",
        );
        assert!(!warnings(&s).join("\n").contains("route \"data\""));
    }

    #[test]
    fn every_chat_channel_is_known_to_the_warnings_through_the_registry() {
        // DingTalk and WeCom with empty approver lists, answered through a route's approvers.
        let mut s = settings(
            "[[people]]\nname = \"chen\"\ndingtalk = [\"u-chen\"]\nwecom = [\"chen\"]\n\
             [[routes]]\nname = \"data\"\ndingtalk = [\"cid-1\"]\nwecom = [\"wr-1\"]\n\
             approvers = [\"chen\"]\ntool = [\"Bash\"]\n\
             [[routes]]\nname = \"ops\"\ndingtalk = [\"cid-1\"]\napprovers = [\"alice\"]",
        );
        s.dingtalk.enabled = true;
        s.dingtalk.conversations = vec!["cid-1".into()];
        s.wecom.enabled = true;
        s.wecom.chats = vec!["wr-1".into()];
        compile(&s).unwrap();
        let w = warnings(&s).join("\n");
        assert!(!w.contains("dingtalk.approvers is empty"), "{w}");
        assert!(!w.contains("wecom.approvers is empty"), "{w}");
        assert!(
            w.contains(
                "route \"ops\" sends to dingtalk, but none of its approvers (alice) has a \
                 dingtalk id"
            ),
            "{w}"
        );
        // Chen messaged directly: on DingTalk as a user, on WeCom by userid.
        let t = compile(&s).unwrap();
        assert_eq!(
            t.people.person("chen").unwrap().ids_on("dingtalk").count(),
            1
        );
    }

    #[test]
    fn ids_and_places_are_read_by_their_channel() {
        let refused = |people: &str, routes: &str| {
            let mut s = settings(routes);
            let f: File = toml::from_str(people).unwrap();
            s.people.extend(f.people);
            compile(&s).unwrap_err()
        };
        let e = refused("[[people]]\nname = \"eve\"\ntelegarm = [1]", "");
        assert!(
            e.contains(
                "people[2] (\"eve\").telegarm: `telegarm` is neither a setting of [[people]] \
                 nor a channel: did you mean `telegram`?"
            ),
            "{e}"
        );
        let e = refused("[[people]]\nname = \"eve\"\nxyz = [1]", "");
        assert!(
            e.contains("`xyz` is neither a setting of [[people]] (name, operator, groups, quiet, time_zone) nor a channel (telegram, feishu, slack"),
            "{e}"
        );
        let e = refused("[[people]]\nname = \"eve\"\ntelegram = [\"eve\"]", "");
        assert!(
            e.contains("people[2] (\"eve\").telegram[0]: \"eve\" is a text"),
            "{e}"
        );
        let e = refused("", "[[routes]]\nname = \"r\"\nslack = [\"C1\"]");
        assert!(
            e.contains("routes[0] (\"r\").slack[0]: \"C1\" is not in slack.chats"),
            "{e}"
        );
        let e = refused("", "[[routes]]\nname = \"r\"\nwebhook = [\"pager\"]");
        assert!(
            e.contains(
                "`webhook` is neither a setting of [[routes]] nor a channel: did you mean \
                 `webhooks`?"
            ),
            "{e}"
        );
    }

    #[test]
    fn an_escalation_compiles_with_its_places_and_shows_in_the_table() {
        let s = settings(
            r#"
[[routes]]
name = "shop"
telegram = [-1001]
approvers = ["alice"]
timeout_secs = 1800
escalate_after_secs = 300
[routes.escalate_to]
telegram = [-1002]
direct = ["bob"]
approvers = ["bob"]
"#,
        );
        let t = compile(&s).unwrap();
        let e = t
            .routes
            .get("shop")
            .unwrap()
            .spec()
            .escalation
            .clone()
            .unwrap();
        assert_eq!(e.after_secs, 300);
        assert_eq!(
            e.targets,
            [
                Target::new("feishu", "open_id:ou_b"),
                Target::new("telegram", "-1002")
            ]
        );
        assert_eq!(e.approvers, ["bob"]);
        let table = table(&t);
        assert!(
            table
                .lines()
                .nth(1)
                .unwrap()
                .ends_with("after 300s to feishu:open_id:ou_b, telegram:-1002; approvers bob"),
            "{table}"
        );
    }

    #[test]
    fn escalations_that_cannot_work_are_refused() {
        let refused = |extra: &str| {
            compile(&settings(&format!(
                "[[routes]]\nname = \"r\"\ntelegram = [-1001]\ntimeout_secs = 600\n{extra}"
            )))
            .unwrap_err()
        };
        let e = refused("escalate_after_secs = 60");
        assert!(e.contains("escalate_after_secs needs escalate_to"), "{e}");
        let e = refused("[routes.escalate_to]\ntelegram = [-1002]");
        assert!(e.contains("escalate_to needs escalate_after_secs"), "{e}");
        let e = refused("escalate_after_secs = 60\n[routes.escalate_to]\ntelegram = [-9]");
        assert!(
            e.starts_with("routes[0] (\"r\").escalate_to.telegram[0]: chat -9"),
            "{e}"
        );
        let e = refused("escalate_after_secs = 600\n[routes.escalate_to]\ntelegram = [-1002]");
        assert!(
            e.contains("escalate_after_secs") && e.contains("timeout_secs"),
            "{e}"
        );
        let e = refused("escalate_after_secs = 60\n[routes.escalate_to]\napprovers = [\"carol\"]");
        assert!(e.contains("escalate_to.approvers[0]"), "{e}");
        let e = refused("escalate_after_secs = 60\n[routes.escalate_to]");
        assert!(e.contains("names no chat"), "{e}");
    }

    #[test]
    fn routes_naming_unknown_places_or_people_are_refused() {
        let refused = |routes: &str| compile(&settings(routes)).unwrap_err();
        let e = refused("[[routes]]\nname = \"r\"\ntelegram = [-9]");
        assert!(
            e.starts_with("routes[0] (\"r\").telegram[0]: chat -9 is not in telegram.chats"),
            "{e}"
        );
        let e = refused("[[routes]]\nname = \"r\"\nfeishu = [\"chat_id:oc_9\"]");
        assert!(e.contains("feishu[0]") && e.contains("feishu.chats"), "{e}");
        let e = refused("[[routes]]\nname = \"r\"\nslack = [\"C9\"]");
        assert!(e.contains("slack.chats"), "{e}");
        let e = refused("[[routes]]\nname = \"r\"\nwebhooks = [\"nope\"]");
        assert!(e.contains("[[webhooks]]"), "{e}");
        let e = refused("[[routes]]\nname = \"r\"\ndirect = [\"carol\"]");
        assert!(e.contains("direct[0]") && e.contains("not a person"), "{e}");
        let e = refused("[[routes]]\nname = \"r\"\napprovers = [\"carol\"]");
        assert!(e.contains("approvers[0]"), "{e}");
        let e = refused(
            "[[routes]]\nname = \"all\"\n[[routes]]\nname = \"later\"\nagent = [\"codex\"]",
        );
        assert!(e.contains("can never match"), "{e}");
        // Alice has no Feishu or Slack id, and Telegram is her only one: turned off, nothing
        // is left to message.
        let mut s = settings("[[routes]]\nname = \"r\"\ndirect = [\"alice\"]");
        s.telegram.enabled = false;
        assert!(
            compile(&s)
                .unwrap_err()
                .contains("no id on an enabled chat channel")
        );
        let mut s = settings("");
        s.groups = vec![GroupSettings {
            name: "ops".into(),
            members: vec!["zed".into()],
        }];
        assert!(compile(&s).unwrap_err().contains("groups[0].members[0]"));
    }
}
