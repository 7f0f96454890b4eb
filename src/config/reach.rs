//! Settings that are each valid but that can never work together, checked across sections:
//! a quorum more people than may answer, a deny quorum above its quorum, places on channels
//! that are turned off, an escalation after the deadline, a person nobody can recognise,
//! Slack names where ids belong. Refused (or, where it may still be meant, warned about) at
//! start-up and by `imrelay check-config`, each with its fix.

use std::collections::BTreeSet;

use super::Settings;
use super::teams::RouteSettings;
use crate::interaction::Teams;

/// The problems (refused), each a complete message.
pub(super) fn problems(s: &Settings) -> Vec<String> {
    let mut out: Vec<String> = s.channels().iter().flat_map(|c| c.problems()).collect();
    for (k, r) in s.routes.iter().enumerate() {
        for (j, t) in r.tool.iter().enumerate() {
            if let Some(known) = crate::interaction::policy::pattern::miscased_tool(t) {
                out.push(format!(
                    "routes[{k}] ({:?}).tool[{j}]: `{t}` is not a tool name: tool names are \
                     case-sensitive, so it would match nothing; write tool = [\"{known}\"]",
                    r.name
                ));
            }
        }
    }
    // The rest needs the teams; when they do not compile, validation says why.
    let Ok(teams) = s.teams() else {
        return out;
    };
    for (k, r) in s.routes.iter().enumerate() {
        let at = format!("routes[{k}] ({:?})", r.name);
        deny_above_quorum(&at, r.quorum, r.deny_quorum, &mut out);
        if let Some(q) = r.quorum.filter(|q| *q > 1) {
            let who = route_answerers(s, &teams, r);
            if !who.is_empty() && who.len() < q as usize {
                out.push(unreachable(&at, q, &who, "approvers"));
            }
        }
        let places = |e: bool| places_of(&teams, &r.name, e);
        let (on, off) = split_by_enabled(s, &places(false));
        if on.is_empty() && !off.is_empty() {
            out.push(format!(
                "{at} sends only to {}, on channels that are turned off: nothing would be posted \
                 (only the inbox and the terminal would see it). Enable the channel \
                 ({}.enabled = true) or send the route elsewhere",
                off.join(", "),
                channel_of(&off[0])
            ));
        }
        let (on, off) = split_by_enabled(s, &places(true));
        if on.is_empty() && !off.is_empty() {
            out.push(format!(
                "{at}.escalate_to names only {}, on channels that are turned off: the escalation \
                 would post nowhere. Enable the channel ({}.enabled = true) or escalate elsewhere",
                off.join(", "),
                channel_of(&off[0])
            ));
        }
    }
    for (k, rule) in s.policy.iter().enumerate() {
        let at = format!("policy[{k}] ({:?})", rule.name);
        deny_above_quorum(&at, rule.quorum, rule.deny_quorum, &mut out);
        if let Some(q) = rule.quorum.filter(|q| *q > 1) {
            policy_quorum(s, &teams, &at, q, &rule.route, &mut out);
        }
    }
    out
}

/// `deny_quorum` above `quorum` is refused (it used to be lowered to `quorum` silently).
fn deny_above_quorum(at: &str, quorum: Option<u32>, deny: Option<u32>, out: &mut Vec<String>) {
    if let (Some(q), Some(d)) = (quorum, deny)
        && d > q
    {
        out.push(format!(
            "{at}.deny_quorum = {d} is more than quorum = {q}: the denies asked for can be at \
             most the allows asked for. Use deny_quorum = {q} (or less)"
        ));
    }
}

/// The message for a quorum of `q` that only `who` may give.
fn unreachable(at: &str, q: u32, who: &BTreeSet<String>, field: &str) -> String {
    let n = who.len();
    let list: Vec<&str> = who.iter().map(String::as_str).collect();
    format!(
        "{at}.quorum = {q}, but only {n} {} may answer it ({}): it could never be reached, and \
         every approval would be denied at its deadline. Lower quorum to {n}, or add people to \
         {field}",
        if n == 1 { "person" } else { "people" },
        list.join(", ")
    )
}

/// The people who may answer route `r` when it names approvers (with its escalation's); empty
/// when it names none (then the channels' lists decide: see [`channel_answerers`]).
fn route_answerers(s: &Settings, teams: &Teams, r: &RouteSettings) -> BTreeSet<String> {
    let mut names: Vec<String> = r.approvers.clone();
    if r.approvers.is_empty() {
        return channel_answerers(s, teams);
    }
    if let Some(e) = &r.escalate_to {
        names.extend(e.approvers.iter().cloned());
    }
    teams
        .people
        .expand(&names)
        .map(|a| a.names().map(str::to_string).collect())
        .unwrap_or_default()
}

/// The people the channels' approver lists and the operator tokens name (one person per
/// configured person, else per id), each webhook, and the administrator: who may answer a
/// route that names no approvers.
fn channel_answerers(s: &Settings, teams: &Teams) -> BTreeSet<String> {
    let mut who = BTreeSet::new();
    let mut add = |channel: &str, id: &str| {
        who.insert(
            teams
                .people
                .name_of(channel, id)
                .map_or_else(|| format!("{channel}:{id}"), str::to_string),
        );
    };
    for c in s.channels() {
        if c.enabled() && c.is_chat() {
            c.approvers().iter().for_each(|id| add(c.name(), id));
        }
    }
    for label in s.auth.operator_labels() {
        add(super::teams::OPERATOR, label);
    }
    // A signed webhook answer is one person per webhook.
    for w in &s.webhooks {
        who.insert(format!("webhook {}", w.name));
    }
    if s.auth.operator_tokens.is_empty() || s.auth.operator_tokens.iter().any(|t| t.label.is_none())
    {
        who.insert(crate::interaction::quorum::ADMINISTRATOR.to_string());
    }
    who
}

/// A policy rule's quorum checked against the routes it can apply to: refused when no route
/// it names (or, naming none, no route at all) has that many people to answer.
fn policy_quorum(
    s: &Settings,
    teams: &Teams,
    at: &str,
    q: u32,
    named: &[String],
    out: &mut Vec<String>,
) {
    let default = crate::interaction::routes::DEFAULT_ROUTE;
    let mut best: Option<(String, BTreeSet<String>)> = None;
    let mut consider = |name: &str, who: BTreeSet<String>| {
        if best.as_ref().is_none_or(|(_, b)| who.len() > b.len()) {
            best = Some((name.to_string(), who));
        }
    };
    for r in &s.routes {
        if named.is_empty() || named.contains(&r.name) {
            consider(&r.name, route_answerers(s, teams, r));
        }
    }
    if named.is_empty() || named.iter().any(|n| n == default) {
        consider(default, channel_answerers(s, teams));
    }
    if let Some((route, who)) = best
        && who.len() < q as usize
    {
        let field = if route == default {
            "the channels' approvers or auth.operator_tokens (labelled)".to_string()
        } else {
            format!("the approvers of route {route:?}")
        };
        out.push(unreachable(at, q, &who, &field));
    }
}

/// The places route `name` (or its escalation) sends to, as `channel:address`.
fn places_of(teams: &Teams, name: &str, escalation: bool) -> Vec<(String, String)> {
    let Some(r) = teams.routes.get(name) else {
        return Vec::new();
    };
    let spec = r.spec();
    let targets = if escalation {
        spec.escalation
            .as_ref()
            .map(|e| &e.targets[..])
            .unwrap_or(&[])
    } else {
        &spec.targets[..]
    };
    targets
        .iter()
        .map(|t| (t.channel.clone(), t.to.clone()))
        .collect()
}

/// Each route that sends (or escalates) to places on channels that are turned off, with
/// those places (`channel:address`).
pub(super) fn places_off(s: &Settings) -> Vec<(String, Vec<String>)> {
    let Ok(teams) = s.teams() else {
        return Vec::new();
    };
    s.routes
        .iter()
        .filter_map(|r| {
            let mut off = split_by_enabled(s, &places_of(&teams, &r.name, false)).1;
            off.extend(split_by_enabled(s, &places_of(&teams, &r.name, true)).1);
            (!off.is_empty()).then(|| (r.name.clone(), off))
        })
        .collect()
}

/// Whether the channel called `channel` is turned on.
fn enabled(s: &Settings, channel: &str) -> bool {
    s.channels()
        .iter()
        .find(|c| c.name() == channel)
        .is_none_or(|c| c.enabled())
}

/// `places` as `channel:address`, split into those on enabled channels and the others.
fn split_by_enabled(s: &Settings, places: &[(String, String)]) -> (Vec<String>, Vec<String>) {
    let (on, off): (Vec<_>, Vec<_>) = places.iter().partition(|(c, _)| enabled(s, c));
    let show = |v: Vec<&(String, String)>| v.iter().map(|(c, a)| format!("{c}:{a}")).collect();
    (show(on), show(off))
}

/// The channel of a `channel:address`.
fn channel_of(place: &str) -> &str {
    place.split(':').next().unwrap_or(place)
}

/// Warnings: settings that may be meant but probably do not do what was meant.
pub(super) fn warnings(s: &Settings) -> Vec<String> {
    let mut out = Vec::new();
    for (k, p) in s.people.iter().enumerate() {
        if p.operator.is_empty() && p.ids.values().all(Vec::is_empty) {
            out.push(format!(
                "people[{k}] ({:?}) has no id on any channel: no answer can be recognised as \
                 theirs, so they can never answer. Add their ids (telegram = [...], slack = \
                 [...], operator = [\"label of their operator token\"], ...)",
                p.name
            ));
        }
    }
    let quorum_used = s.routes.iter().any(|r| r.quorum.is_some_and(|q| q > 1))
        || s.policy.iter().any(|r| r.quorum.is_some_and(|q| q > 1));
    if quorum_used && s.auth.operator_labels().next().is_none() {
        out.push(
            "a quorum is configured, but no operator token has a label: every answer from the \
             inbox, the terminal and the API is one person (the administrator), so a second \
             person cannot vote from there. Give each person their own token with a label \
             (auth.operator_tokens = [{ token = \"...\", label = \"alice\" }]) and list it on \
             them ([[people]] operator = [\"alice\"])"
                .to_string(),
        );
    }
    for (k, r) in s.routes.iter().enumerate() {
        escalation_timing(s, k, r, &mut out);
    }
    for (route, off) in places_off(s) {
        out.push(format!(
            "route {route:?} sends to {}, on channels that are turned off: nothing is posted \
             there. Enable the channel ({}.enabled = true) or take them out of the route",
            off.join(", "),
            channel_of(&off[0])
        ));
    }
    out
}

/// An escalation no sooner than the deadline it would come before never fires.
fn escalation_timing(s: &Settings, k: usize, r: &RouteSettings, out: &mut Vec<String>) {
    let (Some(after), None) = (r.escalate_after_secs, r.timeout_secs) else {
        // With the route's own timeout, the route check refuses it.
        return;
    };
    let deadline = s.interactions.approval_timeout_secs;
    if after >= deadline {
        out.push(format!(
            "routes[{k}] ({:?}).escalate_after_secs = {after} is not less than \
             interactions.approval_timeout_secs = {deadline}, the deadline of an approval whose \
             agent asks none: such an approval ends before it escalates. Lower \
             escalate_after_secs, or give the route a longer timeout_secs",
            r.name
        ));
    }
}
