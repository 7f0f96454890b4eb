//! `[[people]]`, `[[groups]]` and `[[routes]]`: read and checked here, compiled into the
//! core's [`Teams`]. A route's chats, receivers, Slack channels and webhooks must be ones
//! the channels are configured with, its people and groups must exist, and a person it
//! messages directly must have an id to message; everything is checked at start-up and by
//! `imrelay check-config`.

use serde::{Deserialize, Serialize};

use crate::interaction::Kind;
use crate::interaction::Teams;
use crate::interaction::people::{GroupSpec, Identity, People, Person, PersonSpec};
use crate::interaction::routes::{Escalation, RouteSpec, Routes, Target};

use super::Settings;

/// The channel name of Telegram identities and targets.
pub const TELEGRAM: &str = "telegram";
/// The channel name of Feishu identities and targets.
pub const FEISHU: &str = "feishu";
/// The channel name of Slack identities and targets.
pub const SLACK: &str = "slack";
/// The channel name of WeCom identities (userids) and targets (chats).
pub const WECOM: &str = "wecom";
/// The channel name of DingTalk identities and targets.
pub const DINGTALK: &str = "dingtalk";
/// The channel name of webhook identities (sender names) and targets (webhook names).
pub const WEBHOOK: &str = "webhook";
/// The channel name of operator identities (an operator token's label, for the inbox and
/// the terminal).
pub const OPERATOR: &str = "operator";

/// One `[[people]]` table.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PersonSettings {
    /// The name answers and refusals are recorded under.
    pub name: String,
    /// Telegram user ids.
    #[serde(default)]
    pub telegram: Vec<u64>,
    /// Feishu open_ids (`ou_...`) or user_ids.
    #[serde(default)]
    pub feishu: Vec<String>,
    /// Slack user ids (`U...`).
    #[serde(default)]
    pub slack: Vec<String>,
    /// WeCom userids.
    #[serde(default)]
    pub wecom: Vec<String>,
    /// DingTalk userIds.
    #[serde(default)]
    pub dingtalk: Vec<String>,
    /// Sender names in signed webhook answers.
    #[serde(default)]
    pub webhook: Vec<String>,
    /// Labels of operator tokens (the inbox, the terminal).
    #[serde(default)]
    pub operator: Vec<String>,
    /// Groups they belong to.
    #[serde(default)]
    pub groups: Vec<String>,
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
#[serde(deny_unknown_fields)]
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
    /// Telegram chats it posts to (ids listed in `telegram.chats`).
    #[serde(default)]
    pub telegram: Vec<i64>,
    /// Feishu receivers it sends cards to (`type:id`, as listed in `feishu.receivers`).
    #[serde(default)]
    pub feishu: Vec<String>,
    /// Slack conversations it posts to (ids listed in `slack.channels`).
    #[serde(default)]
    pub slack: Vec<String>,
    /// WeCom chats it sends cards to (listed in `wecom.chats`).
    #[serde(default)]
    pub wecom: Vec<String>,
    /// DingTalk groups it sends cards to (openConversationIds listed in
    /// `dingtalk.conversations`).
    #[serde(default)]
    pub dingtalk: Vec<String>,
    /// Webhooks it delivers to (names of `[[webhooks]]`).
    #[serde(default)]
    pub webhooks: Vec<String>,
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
}

/// A route's `escalate_to`: more places to post an unanswered interaction to (chats,
/// receivers, Slack channels, webhooks, people's direct messages) and more people who may
/// answer it. The first copies stay live.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct EscalateTo {
    /// Telegram chats (ids listed in `telegram.chats`).
    #[serde(default)]
    pub telegram: Vec<i64>,
    /// Feishu receivers (`type:id`, as listed in `feishu.receivers`).
    #[serde(default)]
    pub feishu: Vec<String>,
    /// Slack conversations (ids listed in `slack.channels`).
    #[serde(default)]
    pub slack: Vec<String>,
    /// WeCom chats (listed in `wecom.chats`).
    #[serde(default)]
    pub wecom: Vec<String>,
    /// DingTalk group conversations (openConversationIds listed in `dingtalk.conversations`).
    #[serde(default)]
    pub dingtalk: Vec<String>,
    /// Webhooks (names of `[[webhooks]]`).
    #[serde(default)]
    pub webhooks: Vec<String>,
    /// People to message directly, on every chat channel they have an id on.
    #[serde(default)]
    pub direct: Vec<String>,
    /// People and groups who may answer too, from the escalation on.
    #[serde(default)]
    pub approvers: Vec<String>,
}

/// The places a route (or its escalation) names, as configured.
struct Places<'a> {
    telegram: &'a [i64],
    feishu: &'a [String],
    slack: &'a [String],
    wecom: &'a [String],
    dingtalk: &'a [String],
    webhooks: &'a [String],
    direct: &'a [String],
}

impl RouteSettings {
    fn places(&self) -> Places<'_> {
        Places {
            telegram: &self.telegram,
            feishu: &self.feishu,
            slack: &self.slack,
            wecom: &self.wecom,
            dingtalk: &self.dingtalk,
            webhooks: &self.webhooks,
            direct: &self.direct,
        }
    }
}

impl EscalateTo {
    fn places(&self) -> Places<'_> {
        Places {
            telegram: &self.telegram,
            feishu: &self.feishu,
            slack: &self.slack,
            wecom: &self.wecom,
            dingtalk: &self.dingtalk,
            webhooks: &self.webhooks,
            direct: &self.direct,
        }
    }
}

impl PersonSettings {
    fn spec(&self) -> PersonSpec {
        let mut identities = Vec::new();
        identities.extend(
            self.telegram
                .iter()
                .map(|id| Identity::new(TELEGRAM, id.to_string())),
        );
        identities.extend(
            self.feishu
                .iter()
                .map(|id| Identity::new(FEISHU, id.clone())),
        );
        identities.extend(self.slack.iter().map(|id| Identity::new(SLACK, id.clone())));
        identities.extend(self.wecom.iter().map(|id| Identity::new(WECOM, id.clone())));
        identities.extend(
            self.dingtalk
                .iter()
                .map(|id| Identity::new(DINGTALK, id.clone())),
        );
        identities.extend(
            self.webhook
                .iter()
                .map(|id| Identity::new(WEBHOOK, id.clone())),
        );
        identities.extend(
            self.operator
                .iter()
                .map(|id| Identity::new(OPERATOR, id.clone())),
        );
        PersonSpec {
            name: self.name.clone(),
            identities,
            groups: self.groups.clone(),
        }
    }
}

/// A Feishu receiver for a person's id: an open_id (`ou_...`) or a user_id.
fn feishu_direct(id: &str) -> String {
    if id.starts_with("ou_") {
        format!("open_id:{id}")
    } else {
        format!("user_id:{id}")
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
            return Err(format!(
                "{}: {name:?} has no id on an enabled chat channel (telegram, feishu, slack, dingtalk, wecom) to message",
                at(&format!("direct[{j}]"))
            ));
        }
        targets.extend(direct);
    }
    targets.sort();
    targets.dedup();
    Ok(targets)
}

/// The chats, receivers, channels, conversations and webhooks `p` lists, each checked
/// against its channel's settings; `at` names a field in errors.
fn listed_targets(
    s: &Settings,
    p: &Places<'_>,
    at: &dyn Fn(&str) -> String,
) -> Result<Vec<Target>, String> {
    let mut targets = Vec::new();
    for (j, chat) in p.telegram.iter().enumerate() {
        if !s.telegram.chats.contains(chat) {
            return Err(format!(
                "{}: chat {chat} is not in telegram.chats: add it there, or route to a listed chat",
                at(&format!("telegram[{j}]"))
            ));
        }
        targets.push(Target::new(TELEGRAM, chat.to_string()));
    }
    for (j, rec) in p.feishu.iter().enumerate() {
        if !s.feishu.receivers.iter().any(|x| x.address() == *rec) {
            return Err(format!(
                "{}: {rec:?} is not in feishu.receivers (written `type:id`, e.g. \"chat_id:oc_...\")",
                at(&format!("feishu[{j}]"))
            ));
        }
        targets.push(Target::new(FEISHU, rec.clone()));
    }
    for (j, c) in p.slack.iter().enumerate() {
        if !s.slack.channels.contains(c) {
            return Err(format!(
                "{}: {c:?} is not in slack.channels",
                at(&format!("slack[{j}]"))
            ));
        }
        targets.push(Target::new(SLACK, c.clone()));
    }
    for (j, c) in p.wecom.iter().enumerate() {
        if !s.wecom.chats.contains(c) {
            return Err(format!(
                "{}: {c:?} is not in wecom.chats",
                at(&format!("wecom[{j}]"))
            ));
        }
        targets.push(Target::new(WECOM, c.clone()));
    }
    for (j, c) in p.dingtalk.iter().enumerate() {
        if !s.dingtalk.conversations.contains(c) {
            return Err(format!(
                "{}: {c:?} is not in dingtalk.conversations",
                at(&format!("dingtalk[{j}]"))
            ));
        }
        targets.push(Target::new(DINGTALK, c.clone()));
    }
    for (j, w) in p.webhooks.iter().enumerate() {
        if !s.webhooks.iter().any(|x| x.name == *w) {
            return Err(format!(
                "{}: {w:?} is not the name of a [[webhooks]] entry",
                at(&format!("webhooks[{j}]"))
            ));
        }
        targets.push(Target::new(WEBHOOK, w.clone()));
    }
    Ok(targets)
}

/// Where to message `p` directly: their ids on every enabled chat channel.
fn direct_targets(s: &Settings, p: &Person) -> Vec<Target> {
    let mut targets = Vec::new();
    if s.telegram.enabled {
        targets.extend(p.ids_on(TELEGRAM).map(|id| Target::new(TELEGRAM, id)));
    }
    if s.feishu.enabled {
        targets.extend(
            p.ids_on(FEISHU)
                .map(|id| Target::new(FEISHU, feishu_direct(id))),
        );
    }
    if s.slack.enabled {
        targets.extend(p.ids_on(SLACK).map(|id| Target::new(SLACK, id)));
    }
    if s.wecom.enabled {
        targets.extend(p.ids_on(WECOM).map(|id| Target::new(WECOM, id)));
    }
    if s.dingtalk.enabled {
        targets.extend(
            p.ids_on(DINGTALK)
                .map(|id| Target::new(DINGTALK, format!("user:{id}"))),
        );
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
    People::new(
        s.people.iter().map(PersonSettings::spec).collect(),
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

/// The chat channel `c` is, among those whose approvers routes can name (`None`: another).
fn chat_name(s: &Settings, c: &dyn crate::channels::Channel) -> Option<&'static str> {
    let c = c as *const dyn crate::channels::Channel;
    if std::ptr::addr_eq(c, &s.telegram) {
        Some(TELEGRAM)
    } else if std::ptr::addr_eq(c, &s.feishu) {
        Some(FEISHU)
    } else if std::ptr::addr_eq(c, &s.slack) {
        Some(SLACK)
    } else {
        None
    }
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
        match chat_name(s, c) {
            Some(name) if routed(name) => {}
            _ => out.extend(c.warnings()),
        }
    }
    for r in teams.routes.routes() {
        let spec = r.spec();
        if spec.approvers.is_empty() {
            continue;
        }
        let mut channels: Vec<&str> = spec
            .targets
            .iter()
            .map(|t| t.channel.as_str())
            .filter(|c| [TELEGRAM, FEISHU, SLACK].contains(c))
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
                Target::new(FEISHU, "open_id:ou_b"),
                Target::new(TELEGRAM, "-1002")
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
        assert!(
            e.contains("feishu[0]") && e.contains("feishu.receivers"),
            "{e}"
        );
        let e = refused("[[routes]]\nname = \"r\"\nslack = [\"C9\"]");
        assert!(e.contains("slack.channels"), "{e}");
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
