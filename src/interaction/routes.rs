//! Routes: where an interaction goes and who may answer it.
//!
//! A [`Route`] matches interactions on their agent, session, working directory (globs),
//! tool (globs over the tool's name), kind and the labels the agent sent; it names the
//! places its interactions are sent ([`Target`]: a channel's name and an address on it),
//! the people and groups who may answer them, and a timeout. [`Routes::route_for`] takes the
//! first route that matches; after the configured ones comes an implicit last route that
//! sends everything everywhere, answered by the channels' own approver lists (what imrelay
//! does with no routes at all).
//!
//! The route an interaction took is stamped on it at creation ([`RouteStamp`]), so every
//! copy can say which route it came through, each channel plans its messages from the
//! stamp, and a tap is checked against the route's approvers as they are configured when
//! the tap comes.
//!
//! A route may escalate ([`Escalation`]): when nobody answered one of its interactions
//! within `after_secs`, the registry posts it to more places too, and more people may
//! answer it from then on. The escalation is part of the stamp, so every process agrees on
//! it whatever its configuration says later.

use std::sync::Arc;

use globset::GlobMatcher;

use super::model::{Interaction, Kind};
use super::people::{People, Person};
use super::policy::pattern;

mod escalation;

pub use super::model::{DEFAULT_ROUTE, Escalation, RouteStamp, Target, route_name};
use escalation::{check_escalation, escalated};

/// A route as given, before [`Routes::new`] checks it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RouteSpec {
    /// Its name: shown on every copy, in the audit trail and in filters.
    pub name: String,
    /// Globs over the agent's label; none: any.
    pub agents: Vec<String>,
    /// Globs over the session label; none: any.
    pub sessions: Vec<String>,
    /// Absolute path globs over the working directory; none: any.
    pub cwds: Vec<String>,
    /// Globs over the tool's name (`Bash`, `mcp__github__*`); none: any.
    pub tools: Vec<String>,
    /// Kinds; none: every kind.
    pub kinds: Vec<Kind>,
    /// Labels the interaction must all carry; none: any.
    pub labels: Vec<String>,
    /// Where its interactions are sent (already resolved to addresses).
    pub targets: Vec<Target>,
    /// The people and groups who may answer; none: the channels' approver lists.
    pub approvers: Vec<String>,
    /// The longest its interactions wait, and their timeout when the agent asks none.
    pub timeout_secs: Option<u64>,
    /// How many different people must allow its approvals (the two-person rule); none or
    /// 1: one.
    pub quorum: Option<u32>,
    /// With `quorum`: how many different people's denies deny (default 1).
    pub deny_quorum: Option<u32>,
    /// Where its interactions go, and who may answer them too, when nobody answered in time.
    pub escalation: Option<Escalation>,
    /// What a finished turn of the sessions that take it does; unset: the agent's setting.
    pub on_finish: Option<super::sessions::OnFinish>,
    /// How long `on_finish = "ask"` holds such a session's agent for a reply, seconds;
    /// unset: the agent's setting.
    pub finish_wait_secs: Option<u64>,
    /// An answer counts only with a passkey assertion made in the inbox.
    pub step_up: bool,
    /// "Desk first": how long the phone copies wait while an approver is at the desk.
    pub desk_first_secs: Option<u64>,
    /// With `desk_first_secs`: the chat copies wait too.
    pub desk_first_chats: bool,
}

/// A route that cannot be used: its place (`routes[1].cwd[0]`) and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct RouteError {
    /// Where.
    pub field: String,
    /// What is wrong and how to fix it.
    pub message: String,
}

/// A route, checked.
#[derive(Clone, Debug)]
pub struct Route {
    spec: RouteSpec,
    /// The stamp its interactions carry, made once: every interaction taking the route
    /// shares it (pending interactions are held in memory).
    stamp: Arc<RouteStamp>,
    agents: Vec<GlobMatcher>,
    sessions: Vec<GlobMatcher>,
    cwds: Vec<GlobMatcher>,
    tools: Vec<GlobMatcher>,
}

fn glob(text: &str, literal_separator: bool) -> Result<GlobMatcher, String> {
    globset::GlobBuilder::new(text)
        .literal_separator(literal_separator)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| format!("{text:?} is not a valid glob: {}", e.kind()))
}

fn globs(
    field: &str,
    texts: &[String],
    literal_separator: bool,
) -> Result<Vec<GlobMatcher>, RouteError> {
    texts
        .iter()
        .enumerate()
        .map(|(k, t)| {
            glob(t, literal_separator).map_err(|message| RouteError {
                field: format!("{field}[{k}]"),
                message,
            })
        })
        .collect()
}

fn has_glob_chars(s: &str) -> bool {
    s.contains(['*', '?', '[', '{'])
}

impl Route {
    /// Its name.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// It as given.
    pub fn spec(&self) -> &RouteSpec {
        &self.spec
    }

    /// Whether `i` matches every matcher the route has.
    pub fn matches(&self, i: &Interaction) -> bool {
        let any = |gs: &[GlobMatcher], v: Option<&str>| {
            gs.is_empty() || v.is_some_and(|v| gs.iter().any(|g| g.is_match(v)))
        };
        if !self.spec.kinds.is_empty() && !self.spec.kinds.contains(&i.kind) {
            return false;
        }
        if !any(&self.agents, i.agent.as_deref())
            || !any(&self.sessions, i.session.as_deref())
            || !any(&self.tools, Some(&i.tool_name))
        {
            return false;
        }
        if !self.cwds.is_empty() {
            let Some(cwd) = i.cwd.as_deref().and_then(|c| pattern::normalise(c, None)) else {
                return false;
            };
            // `/srv/shop/**` covers the project's own directory too.
            let inside = format!("{}/", cwd.trim_end_matches('/'));
            if !self
                .cwds
                .iter()
                .any(|g| g.is_match(&cwd) || g.is_match(&inside))
            {
                return false;
            }
        }
        self.spec
            .labels
            .iter()
            .all(|l| i.labels().iter().any(|have| &**have == l.as_str()))
    }

    /// The stamp an interaction taking this route carries (one, shared).
    pub fn stamp(&self) -> Arc<RouteStamp> {
        self.stamp.clone()
    }

    /// How many people decide its approvals; `None`: one.
    pub fn quorum(&self) -> Option<super::quorum::Quorum> {
        super::quorum::Quorum::of(self.spec.quorum, self.spec.deny_quorum)
    }

    /// Whether an earlier route `e` matches everything this one does (so this one never
    /// matches): each of `e`'s matchers is absent or lists every value this one lists.
    fn shadowed_by(&self, e: &Route) -> bool {
        fn covers<T: PartialEq>(earlier: &[T], later: &[T]) -> bool {
            earlier.is_empty() || (!later.is_empty() && later.iter().all(|l| earlier.contains(l)))
        }
        let (a, b) = (&e.spec, &self.spec);
        covers(&a.agents, &b.agents)
            && covers(&a.sessions, &b.sessions)
            && covers(&a.cwds, &b.cwds)
            && covers(&a.tools, &b.tools)
            && covers(&a.kinds, &b.kinds)
            && a.labels.iter().all(|l| b.labels.contains(l))
    }
}

/// The implicit last route's stamp, one for every interaction that takes it.
fn default_stamp() -> Arc<RouteStamp> {
    static DEFAULT: std::sync::LazyLock<Arc<RouteStamp>> =
        std::sync::LazyLock::new(|| Arc::new(RouteStamp::default_route()));
    DEFAULT.clone()
}
/// The places on `channel` an interaction goes to: its route's addresses when it was routed,
/// otherwise every one the channel is configured with (`configured`).
pub fn destinations<'a>(
    route: Option<&'a RouteStamp>,
    channel: &'a str,
    configured: &'a [String],
) -> Vec<&'a str> {
    match route.and_then(|r| r.addresses(channel)) {
        Some(to) => to.collect(),
        None => configured.iter().map(String::as_str).collect(),
    }
}

/// Who may answer a routed interaction, by a tap from `id` on `channel`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// They may.
    Admitted,
    /// The route names its approvers, and this identity is none of them: the route's name.
    OtherRoute,
    /// The route leaves it to the channel's approver list, and they are not on it.
    NotApprover,
}

/// Whether `id` on `channel` (on the channel's own approver list or not, `listed`) may
/// answer interaction `i`, as `people` are now configured.
pub fn admission(
    i: &Interaction,
    people: &People,
    channel: &str,
    id: &str,
    listed: bool,
) -> Admission {
    let admits = |names: &[String]| {
        people
            .expand(names)
            .is_ok_and(|a| a.admits(people, channel, id))
    };
    if let Some(e) = i.route.as_deref().and_then(|r| r.escalation.as_ref())
        && !e.approvers.is_empty()
        && escalated(i, e)
        && admits(&e.approvers)
    {
        return Admission::Admitted;
    }
    route_admission(i.route.as_deref(), people, channel, id, listed)
}

/// Whether `id` on `channel` (on the channel's own approver list or not, `listed`) may
/// answer what takes route `route` (`None`: no route is configured) before any escalation,
/// as `people` are now configured: what a person may grant or revoke on that route too.
pub fn route_admission(
    route: Option<&RouteStamp>,
    people: &People,
    channel: &str,
    id: &str,
    listed: bool,
) -> Admission {
    match route {
        Some(stamp) if !stamp.approvers.is_empty() => {
            let admitted = people
                .expand(&stamp.approvers)
                .is_ok_and(|a| a.admits(people, channel, id));
            if admitted {
                Admission::Admitted
            } else {
                // A name no longer configured admits nobody.
                Admission::OtherRoute
            }
        }
        _ if listed => Admission::Admitted,
        _ => Admission::NotApprover,
    }
}

/// Checks a route's name: not empty, no spaces at its ends, not [`DEFAULT_ROUTE`], not an
/// earlier route's.
fn check_name(
    name: &str,
    earlier: &[Route],
    at: &dyn Fn(&str) -> String,
) -> Result<(), RouteError> {
    let err = |message: String| {
        Err(RouteError {
            field: at("name"),
            message,
        })
    };
    let trimmed = name.trim();
    if trimmed.is_empty() || trimmed != name || name.chars().any(char::is_control) {
        return err(format!(
            "{name:?} must be a non-empty name without spaces at its ends"
        ));
    }
    if name == DEFAULT_ROUTE {
        return err(format!(
            "{DEFAULT_ROUTE:?} is the implicit last route's name: choose another"
        ));
    }
    if earlier.iter().any(|r| r.name() == name) {
        return err(format!("{name:?} is the name of an earlier route"));
    }
    Ok(())
}

/// Checks what a route asks for on its own, its name aside: absolute cwd globs, approvers
/// who are people or groups, counts of at least 1, a deny quorum only with a quorum, its
/// escalation, and kinds its named tools can be.
fn check_spec(
    spec: &RouteSpec,
    people: &People,
    at: &dyn Fn(&str) -> String,
) -> Result<(), RouteError> {
    let err = |field: String, message: String| RouteError { field, message };
    for (j, c) in spec.cwds.iter().enumerate() {
        if !c.starts_with('/') && !c.starts_with('*') {
            return Err(err(
                at(&format!("cwd[{j}]")),
                format!("{c:?} must be an absolute path glob, e.g. /srv/shop/**"),
            ));
        }
    }
    for (j, a) in spec.approvers.iter().enumerate() {
        if !people.knows(a) {
            return Err(err(
                at(&format!("approvers[{j}]")),
                format!(
                    "{a:?} is neither a person nor a group: add it to [[people]] or [[groups]]"
                ),
            ));
        }
    }
    for (f, n) in [
        ("timeout_secs", spec.timeout_secs),
        ("quorum", spec.quorum.map(u64::from)),
        ("deny_quorum", spec.deny_quorum.map(u64::from)),
        ("finish_wait_secs", spec.finish_wait_secs),
    ] {
        if n == Some(0) {
            return Err(err(at(f), "must be at least 1".into()));
        }
    }
    if spec.deny_quorum.is_some() && spec.quorum.is_none() {
        return Err(err(
            at("deny_quorum"),
            "goes with quorum (how many people must allow)".into(),
        ));
    }
    if let Some(e) = &spec.escalation {
        check_escalation(e, spec.timeout_secs, people, at)?;
    }
    // Tools named without globs have a known kind: a route asking other kinds only
    // can never match.
    if !spec.kinds.is_empty()
        && !spec.tools.is_empty()
        && spec
            .tools
            .iter()
            .all(|t| !has_glob_chars(t) && !spec.kinds.contains(&Kind::of_tool(t)))
    {
        return Err(err(
            at("kind"),
            format!(
                "no tool in {:?} is of kind {:?}: this route can never match",
                spec.tools,
                spec.kinds.iter().map(|k| k.as_str()).collect::<Vec<_>>()
            ),
        ));
    }
    Ok(())
}

/// The routes, checked, in order.
#[derive(Clone, Debug, Default)]
pub struct Routes {
    routes: Vec<Route>,
}

impl Routes {
    /// Checks `specs` against `people`: every glob compiles, every approver is a person or
    /// a group, no route is shadowed by an earlier one, names are unique and none is
    /// [`DEFAULT_ROUTE`]. Addresses are checked by whoever resolved them.
    pub fn new(specs: Vec<RouteSpec>, people: &People) -> Result<Self, RouteError> {
        let mut routes: Vec<Route> = Vec::with_capacity(specs.len());
        for (k, spec) in specs.into_iter().enumerate() {
            let at = |f: &str| format!("routes[{k}].{f}");
            let err = |field: String, message: String| RouteError { field, message };
            check_name(&spec.name, &routes, &at)?;
            check_spec(&spec, people, &at)?;
            let route = Route {
                stamp: Arc::new(RouteStamp {
                    name: spec.name.clone(),
                    targets: Some(spec.targets.clone()),
                    approvers: spec.approvers.clone(),
                    escalation: spec.escalation.clone(),
                    step_up: spec.step_up,
                    desk_first_secs: spec.desk_first_secs.filter(|s| *s > 0),
                    desk_first_chats: spec.desk_first_chats,
                }),
                agents: globs(&at("agent"), &spec.agents, false)?,
                sessions: globs(&at("session"), &spec.sessions, false)?,
                cwds: globs(&at("cwd"), &spec.cwds, true)?,
                tools: globs(&at("tool"), &spec.tools, false)?,
                spec,
            };
            if let Some(e) = routes.iter().find(|e| route.shadowed_by(e)) {
                return Err(err(
                    at("name"),
                    format!(
                        "route {:?} can never match: the earlier route {:?} takes every interaction it would (first match wins; move it up or narrow {:?})",
                        route.name(),
                        e.name(),
                        e.name()
                    ),
                ));
            }
            routes.push(route);
        }
        Ok(Self { routes })
    }

    /// Whether no route is configured (every interaction goes everywhere, unstamped).
    pub fn is_empty(&self) -> bool {
        self.routes.is_empty()
    }

    /// The configured routes, in order.
    pub fn routes(&self) -> &[Route] {
        &self.routes
    }

    /// The route `name`.
    pub fn get(&self, name: &str) -> Option<&Route> {
        self.routes.iter().find(|r| r.name() == name)
    }

    /// The first route `i` matches, `None` for the implicit last route.
    pub fn route_for(&self, i: &Interaction) -> Option<&Route> {
        self.routes.iter().find(|r| r.matches(i))
    }

    /// The stamp of the route named `name` (the implicit last route's for
    /// [`DEFAULT_ROUTE`]); `None` when there is no such route.
    pub fn stamp_named(&self, name: &str) -> Option<Arc<RouteStamp>> {
        if name == DEFAULT_ROUTE {
            return Some(default_stamp());
        }
        self.get(name).map(Route::stamp)
    }

    /// The stamp `i` gets: its route's, the implicit last route's, or none when no route is
    /// configured at all. Shared by every interaction taking the same route.
    pub fn stamp_for(&self, i: &Interaction) -> Option<Arc<RouteStamp>> {
        if self.routes.is_empty() {
            return None;
        }
        Some(
            self.route_for(i)
                .map(Route::stamp)
                .unwrap_or_else(default_stamp),
        )
    }
}

/// Whether an answer to `i` counts only with a passkey assertion (its route's or a
/// matching ask rule's `step_up`, stamped at creation).
pub fn needs_step_up(i: &Interaction) -> bool {
    i.route.as_ref().is_some_and(|r| r.step_up)
}

/// A person's direct-message addresses on `channel`: their ids there.
pub fn direct<'a>(person: &'a Person, channel: &'a str) -> impl Iterator<Item = &'a str> + 'a {
    person.ids_on(channel)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interaction::model::{InteractionId, now};
    use crate::interaction::people::{Identity, PersonSpec};

    pub(super) fn people() -> People {
        People::new(
            vec![
                PersonSpec {
                    name: "alice".into(),
                    identities: vec![Identity::new("telegram", "111")],
                    groups: vec!["web".into()],
                    quiet: None,
                },
                PersonSpec {
                    name: "bob".into(),
                    identities: vec![Identity::new("feishu", "ou_b")],
                    groups: vec![],
                    quiet: None,
                },
            ],
            vec![],
        )
        .unwrap()
    }

    pub(super) fn call(tool: &str, agent: &str, cwd: &str) -> Interaction {
        let mut i = Interaction::pending(
            InteractionId::parse("x").unwrap(),
            tool,
            serde_json::Map::new(),
            now(),
            60,
        );
        i.agent = Some(agent.into());
        i.cwd = Some(cwd.into());
        i
    }

    fn shop_and_data() -> Routes {
        Routes::new(
            vec![
                RouteSpec {
                    name: "shop".into(),
                    cwds: vec!["/srv/shop/**".into()],
                    targets: vec![Target::new("telegram", "-100")],
                    approvers: vec!["web".into()],
                    timeout_secs: Some(600),
                    ..Default::default()
                },
                RouteSpec {
                    name: "data-mcp".into(),
                    agents: vec!["codex".into()],
                    tools: vec!["mcp__db__*".into()],
                    targets: vec![Target::new("feishu", "chat_id:oc_1")],
                    approvers: vec!["bob".into()],
                    ..Default::default()
                },
                RouteSpec {
                    name: "prod".into(),
                    labels: vec!["prod".into()],
                    targets: vec![Target::new("webhook", "pager")],
                    ..Default::default()
                },
            ],
            &people(),
        )
        .unwrap()
    }

    #[test]
    fn first_match_wins_and_the_last_route_is_everything_everywhere() {
        let r = shop_and_data();
        let shop = call("Bash", "claude-code", "/srv/shop");
        assert_eq!(r.route_for(&shop).unwrap().name(), "shop");
        assert_eq!(
            r.route_for(&call("Bash", "codex", "/srv/shop/api"))
                .unwrap()
                .name(),
            "shop"
        );
        assert_eq!(
            r.route_for(&call("mcp__db__query", "codex", "/srv/data"))
                .unwrap()
                .name(),
            "data-mcp"
        );
        // Another agent, another tool: no configured route.
        assert!(
            r.route_for(&call("mcp__db__query", "gemini", "/srv/data"))
                .is_none()
        );
        assert!(r.route_for(&call("Bash", "codex", "/srv/data")).is_none());
        assert!(
            r.route_for(&call("Bash", "codex", "/srv/shopping"))
                .is_none()
        );
        let stamp = r.stamp_for(&call("Bash", "codex", "/srv/data")).unwrap();
        assert_eq!(*stamp, RouteStamp::default_route());
        assert!(stamp.addresses("telegram").is_none());

        let mut labelled = call("Bash", "x", "/tmp");
        labelled.set_labels(vec!["prod".into(), "eu".into()]);
        assert_eq!(r.route_for(&labelled).unwrap().name(), "prod");
        labelled.set_labels(vec!["eu".into()]);
        assert!(r.route_for(&labelled).is_none());

        let s = r.route_for(&shop).unwrap().stamp();
        assert_eq!(
            s.addresses("telegram").unwrap().collect::<Vec<_>>(),
            ["-100"]
        );
        assert_eq!(s.addresses("feishu").unwrap().count(), 0);
        assert!(Routes::default().stamp_for(&shop).is_none());
    }

    #[test]
    fn approvers_of_another_route_are_refused() {
        let p = people();
        let r = shop_and_data();
        let mut i = call("Bash", "claude-code", "/srv/shop");
        i.route = r.stamp_for(&i);
        assert_eq!(
            admission(&i, &p, "telegram", "111", false),
            Admission::Admitted
        );
        // Bob approves the data route; this one is not his, even though Feishu lists him.
        assert_eq!(
            admission(&i, &p, "feishu", "ou_b", true),
            Admission::OtherRoute
        );
        // A stranger on a channel list is not one of the route's approvers either.
        assert_eq!(
            admission(&i, &p, "telegram", "999", true),
            Admission::OtherRoute
        );
        // The implicit route leaves it to the channels' lists.
        let mut d = call("Bash", "gemini", "/tmp");
        d.route = r.stamp_for(&d);
        assert_eq!(
            admission(&d, &p, "feishu", "ou_b", true),
            Admission::Admitted
        );
        assert_eq!(
            admission(&d, &p, "feishu", "ou_b", false),
            Admission::NotApprover
        );
        // A route whose approvers are no longer configured admits nobody.
        let none = People::default();
        assert_eq!(
            admission(&i, &none, "telegram", "111", true),
            Admission::OtherRoute
        );
    }

    #[test]
    fn routes_that_cannot_match_or_name_strangers_are_refused() {
        let p = people();
        let one = |spec: RouteSpec| Routes::new(vec![spec], &p).unwrap_err();
        let two = |a: RouteSpec, b: RouteSpec| Routes::new(vec![a, b], &p).unwrap_err();
        let named = |n: &str| RouteSpec {
            name: n.into(),
            ..Default::default()
        };
        let e = one(RouteSpec {
            approvers: vec!["mallory".into()],
            ..named("a")
        });
        assert_eq!(e.field, "routes[0].approvers[0]");
        let e = two(
            named("all"),
            RouteSpec {
                agents: vec!["codex".into()],
                ..named("codex")
            },
        );
        assert!(e.message.contains("can never match"), "{e}");
        assert!(e.message.contains("\"all\""), "{e}");
        let e = two(
            RouteSpec {
                agents: vec!["codex".into(), "claude-code".into()],
                ..named("agents")
            },
            RouteSpec {
                agents: vec!["codex".into()],
                cwds: vec!["/srv/**".into()],
                ..named("narrower")
            },
        );
        assert_eq!(e.field, "routes[1].name");
        // A narrower earlier route leaves room for a wider later one.
        Routes::new(
            vec![
                RouteSpec {
                    agents: vec!["codex".into()],
                    cwds: vec!["/srv/**".into()],
                    ..named("narrow")
                },
                RouteSpec {
                    agents: vec!["codex".into()],
                    ..named("wide")
                },
            ],
            &p,
        )
        .unwrap();
        let e = one(RouteSpec {
            tools: vec!["Bash".into(), "Edit".into()],
            kinds: vec![Kind::Question],
            ..named("q")
        });
        assert_eq!(e.field, "routes[0].kind");
        let e = one(RouteSpec {
            cwds: vec!["srv/**".into()],
            ..named("rel")
        });
        assert_eq!(e.field, "routes[0].cwd[0]");
        let e = one(RouteSpec {
            tools: vec!["[".into()],
            ..named("bad")
        });
        assert_eq!(e.field, "routes[0].tool[0]");
        assert_eq!(one(named("default")).field, "routes[0].name");
        assert!(
            two(named("x"), named("x"))
                .message
                .contains("earlier route")
        );
        let e = one(RouteSpec {
            timeout_secs: Some(0),
            ..named("t")
        });
        assert_eq!(e.field, "routes[0].timeout_secs");
    }
}
