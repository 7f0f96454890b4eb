//! Policy rules: decisions imrelay takes itself, at creation, before anything is sent.
//!
//! A [`Rule`] names permission patterns in Claude Code's syntax ([`Pattern`]), optional
//! matchers on the interaction's kind, agent and working directory, and a [`Decision`]:
//! allow, deny (with the message the agent receives) or ask (a person decides, the default
//! when nothing matches). A rule in [`Mode::Shadow`] decides nothing: what it would have
//! decided is logged and audited.
//!
//! Rules are weighed as Claude Code weighs its own: a matching deny rule wins, then a
//! matching ask rule, then allow rules; the order of rules decides only which rule of a kind
//! is named. A shell call is cut into simple commands ([`shell`]): it is allowed only when
//! the split is confident and every command is allowed (by one rule or several), and denied
//! (or asked) when any command, including those found inside substitutions and behind
//! wrappers, matches a deny (or ask) rule.
//!
//! Grants ("allow this and similar calls", from a person's answer) are allow rules too,
//! scoped to a session or standing; they are weighed with the live allow rules, after the
//! configured deny and ask rules.
//!
//! The core knows nothing of where rules come from: configuration builds them with
//! [`Rule::new`], and the store keeps grants.

mod flags;
mod grant;
pub mod pattern;
pub mod shell;

pub use grant::{Grant, GrantScope, check_rule, propose};

use globset::GlobMatcher;
use serde::{Deserialize, Serialize};

use super::model::Quorum;
use super::model::{Interaction, Kind};
pub use pattern::{Call, Pattern, PatternError, Subject, Use};

/// What a rule decides.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    /// The call goes ahead without a person.
    Allow,
    /// The call is refused; the agent gets the rule's message.
    Deny,
    /// A person decides (what happens when no rule matches).
    Ask,
}

impl Decision {
    /// `allow`, `deny` or `ask`.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::Deny => "deny",
            Decision::Ask => "ask",
        }
    }
}

/// Whether a rule acts or only says what it would have done.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Its decision is taken.
    #[default]
    Live,
    /// Its decision is logged and audited, not taken.
    Shadow,
}

impl Mode {
    /// `live` or `shadow`.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Live => "live",
            Mode::Shadow => "shadow",
        }
    }
}

/// A rule's parts as given (by configuration, or a grant), before they are compiled.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RuleSpec {
    /// Its name, in audit entries, logs and metrics.
    pub name: String,
    /// Permission patterns; any of them matching is enough. None: every tool.
    pub tools: Vec<String>,
    /// Only interactions of these kinds (none: every kind).
    pub kinds: Vec<Kind>,
    /// Only calls from these agents (globs over the agent's label; none: any).
    pub agents: Vec<String>,
    /// Only calls from these working directories (globs; none: any).
    pub cwds: Vec<String>,
    /// Only calls of this session (grants of session scope).
    pub session: Option<String>,
    /// Only interactions that took one of these routes (names; `default` is the implicit
    /// last route); none: any.
    pub routes: Vec<String>,
    /// What it decides.
    pub decision: Option<Decision>,
    /// For a deny: what the agent is told.
    pub message: Option<String>,
    /// Live or shadow.
    pub mode: Mode,
    /// For an ask rule: how many different people must allow what it matches (the
    /// two-person rule); none or 1: one.
    pub quorum: Option<u32>,
    /// With `quorum`: how many different people's denies deny it (default 1).
    pub deny_quorum: Option<u32>,
    /// For an ask rule: an answer to what it matches counts only with a passkey assertion
    /// made in the inbox.
    pub step_up: bool,
}

/// A rule that cannot be built: which field (`tools[1]`, `cwd[0]`, ...) and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct RuleError {
    /// The field, with its index when it is a list.
    pub field: String,
    /// What is wrong, with the position in the pattern where there is one.
    pub message: String,
}

/// A compiled rule.
#[derive(Clone, Debug)]
pub struct Rule {
    name: String,
    patterns: Vec<Pattern>,
    kinds: Vec<Kind>,
    agents: Vec<GlobMatcher>,
    cwds: Vec<GlobMatcher>,
    session: Option<String>,
    routes: Vec<String>,
    decision: Decision,
    message: Option<String>,
    mode: Mode,
    /// The grant this rule stands for.
    grant: Option<String>,
    /// When it stops counting (a session grant).
    until: Option<jiff::Timestamp>,
    /// Only calls made with this agent token (a session grant: see [`Grant::owner`]).
    owner: Option<String>,
    /// For an ask rule: the people it takes.
    quorum: Option<Quorum>,
    /// For an ask rule: answers need a passkey assertion.
    step_up: bool,
}

fn name_glob(text: &str, literal_separator: bool) -> Result<GlobMatcher, String> {
    globset::GlobBuilder::new(text)
        .literal_separator(literal_separator)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| format!("{text:?} is not a valid glob: {}", e.kind()))
}

/// Checks what goes with a rule's decision: a message only on a deny, only approvals for an
/// allow, a quorum (at least 1, a deny quorum only with one) only on an ask.
fn check_decision(spec: &RuleSpec, decision: Decision) -> Result<(), RuleError> {
    let err = |field: String, message: String| RuleError { field, message };
    if decision != Decision::Deny && spec.message.is_some() {
        return Err(err(
            "message".into(),
            "only a deny rule has a message for the agent".into(),
        ));
    }
    if decision == Decision::Allow && spec.kinds.iter().any(|k| *k != Kind::Approval) {
        return Err(err(
            "kind".into(),
            "an allow rule applies to approvals only: questions and forms need a person's answer"
                .into(),
        ));
    }
    if spec.step_up && decision != Decision::Ask {
        return Err(err(
            "step_up".into(),
            "only an ask rule takes step_up: a person answers what it matches, with a passkey"
                .into(),
        ));
    }
    if spec.quorum.is_some() && decision != Decision::Ask {
        return Err(err(
            "quorum".into(),
            "only an ask rule takes a quorum: people decide what it matches".into(),
        ));
    }
    for (field, n) in [("quorum", spec.quorum), ("deny_quorum", spec.deny_quorum)] {
        if n == Some(0) {
            return Err(err(field.into(), "must be at least 1".into()));
        }
    }
    if spec.deny_quorum.is_some() && spec.quorum.is_none() {
        return Err(err(
            "deny_quorum".into(),
            "goes with quorum (how many people must allow)".into(),
        ));
    }
    Ok(())
}

impl Rule {
    /// Compiles `spec`; every pattern and glob is checked.
    pub fn new(spec: RuleSpec) -> Result<Self, RuleError> {
        let err = |field: String, message: String| RuleError { field, message };
        if spec.name.trim().is_empty() {
            return Err(err("name".into(), "must not be empty".into()));
        }
        let decision = spec.decision.unwrap_or(Decision::Ask);
        let used = if decision == Decision::Allow {
            Use::Allow
        } else {
            Use::Restrict
        };
        let patterns = spec
            .tools
            .iter()
            .enumerate()
            .map(|(k, t)| {
                Pattern::parse(t, used)
                    .map_err(|e| err(format!("tools[{k}]"), format!("{t:?} {e}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let agents = spec
            .agents
            .iter()
            .enumerate()
            .map(|(k, a)| name_glob(a, false).map_err(|e| err(format!("agent[{k}]"), e)))
            .collect::<Result<Vec<_>, _>>()?;
        let cwds = spec
            .cwds
            .iter()
            .enumerate()
            .map(|(k, c)| {
                if !c.starts_with('/') && !c.starts_with('*') {
                    return Err(err(
                        format!("cwd[{k}]"),
                        format!("{c:?} must be an absolute path glob, e.g. /home/*/projects/**"),
                    ));
                }
                name_glob(c, true).map_err(|e| err(format!("cwd[{k}]"), e))
            })
            .collect::<Result<Vec<_>, _>>()?;
        check_decision(&spec, decision)?;
        Ok(Self {
            quorum: Quorum::of(spec.quorum, spec.deny_quorum),
            step_up: spec.step_up,
            name: spec.name.trim().to_string(),
            patterns,
            kinds: spec.kinds,
            agents,
            cwds,
            session: spec.session,
            routes: spec.routes,
            decision,
            message: spec.message.filter(|m| !m.trim().is_empty()),
            mode: spec.mode,
            grant: None,
            until: None,
            owner: None,
        })
    }

    /// The same rule, standing for grant `id`.
    pub fn for_grant(mut self, id: impl Into<String>) -> Self {
        self.grant = Some(id.into());
        self
    }

    /// The same rule, for calls made with agent token `owner` only (named as
    /// [`Interaction::owner`] names it), if given.
    pub fn owned_by(mut self, owner: Option<String>) -> Self {
        self.owner = owner;
        self
    }

    /// The same rule, counting only before `until` (if given).
    pub fn until(mut self, until: Option<jiff::Timestamp>) -> Self {
        self.until = until;
        self
    }

    /// Whether it still counts at `now`.
    pub fn is_live(&self, now: jiff::Timestamp) -> bool {
        self.until.is_none_or(|t| t > now)
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What it decides.
    pub fn decision(&self) -> Decision {
        self.decision
    }

    /// Live or shadow.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Its patterns, as written.
    pub fn patterns(&self) -> impl Iterator<Item = &str> {
        self.patterns.iter().map(Pattern::text)
    }

    /// Whether the interaction passes the rule's matchers other than its patterns.
    fn applies(&self, i: &Interaction) -> bool {
        if self.decision == Decision::Allow && i.kind != Kind::Approval {
            return false;
        }
        if !self.kinds.is_empty() && !self.kinds.contains(&i.kind) {
            return false;
        }
        if !self.agents.is_empty() {
            let Some(agent) = i.agent.as_deref() else {
                return false;
            };
            if !self.agents.iter().any(|g| g.is_match(agent)) {
                return false;
            }
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
        if let Some(session) = &self.session
            && i.session.as_deref() != Some(session.as_str())
        {
            return false;
        }
        // A session id is the agent's to choose: another token naming the same session is
        // another client, and the grant is not theirs.
        if let Some(owner) = &self.owner
            && i.owner.as_deref() != Some(owner.as_str())
        {
            return false;
        }
        if !self.routes.is_empty() {
            let route = super::model::route_name(i);
            if !self.routes.iter().any(|r| r == route) {
                return false;
            }
        }
        true
    }

    /// The first of its patterns that matches `subject` (`""` for a rule without patterns).
    fn matching(&self, call: &Call<'_>, subject: Subject<'_>) -> Option<&str> {
        if self.patterns.is_empty() {
            return Some("");
        }
        self.patterns
            .iter()
            .find(|p| p.matches(call, subject))
            .map(Pattern::text)
    }

    /// The first of its patterns that allows shell part `part`.
    fn allowing(&self, call: &Call<'_>, part: &shell::Part) -> Option<&str> {
        if self.patterns.is_empty() {
            return Some("");
        }
        self.patterns
            .iter()
            .find(|p| p.allows_part(call, part))
            .map(Pattern::text)
    }
}

/// A rule's decision about one interaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decided {
    /// What the rule decided (or, in shadow mode, would have).
    pub decision: Decision,
    /// The rule's name (for an allow by several rules, their names joined by `, `).
    pub rule: String,
    /// The pattern that matched, as written (empty for a rule without patterns).
    pub pattern: String,
    /// Live or shadow.
    pub mode: Mode,
    /// For a deny: the message the agent receives.
    pub message: Option<String>,
    /// The grant that allowed it, if it was a grant.
    pub grant: Option<String>,
}

impl Decided {
    fn of(rule: &Rule, pattern: &str) -> Self {
        Self {
            decision: rule.decision,
            rule: rule.name.clone(),
            pattern: pattern.to_string(),
            mode: rule.mode,
            message: rule.message.clone(),
            grant: rule.grant.clone(),
        }
    }

    /// The deny message the agent receives.
    pub fn deny_message(&self) -> String {
        self.message
            .clone()
            .unwrap_or_else(|| format!("Denied by imrelay policy rule {:?}.", self.rule))
    }
}

/// The rules' verdict on one interaction.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Evaluation {
    /// What the live rules (and grants) decided; `None`: nothing matched, a person decides.
    pub live: Option<Decided>,
    /// What each matching shadow rule would have decided.
    pub shadow: Vec<Decided>,
}

/// The configured rules.
#[derive(Clone, Debug, Default)]
pub struct Policy {
    rules: Vec<Rule>,
}

/// What of an interaction the rules are matched against.
struct Subjects<'a> {
    call: Call<'a>,
    /// For a shell call: its parts when confidently split (allow), and every part found
    /// (deny and ask).
    shell: Option<(Option<Vec<shell::Part>>, Vec<shell::Part>)>,
}

impl<'a> Subjects<'a> {
    fn of(i: &'a Interaction, input: &'a serde_json::Map<String, serde_json::Value>) -> Self {
        let call = Call {
            tool: &i.tool_name,
            input,
            cwd: i.cwd.as_deref(),
        };
        let shell = input
            .get("command")
            .and_then(serde_json::Value::as_str)
            .filter(|_| i.tool_name == "Bash")
            .map(|command| {
                let split = shell::split(command);
                let deny = split.deny_parts();
                (split.confident.then_some(split.parts), deny)
            });
        Self { call, shell }
    }

    /// The first pattern of `rule` matching any subject, for a deny or ask.
    fn any(&self, rule: &Rule) -> Option<String> {
        match &self.shell {
            None => rule
                .matching(&self.call, Subject::Whole)
                .map(str::to_string),
            Some((_, parts)) => {
                if rule.patterns.is_empty() {
                    return Some(String::new());
                }
                // A pattern naming the tool alone matches the call whatever its command.
                parts
                    .iter()
                    .find_map(|p| rule.matching(&self.call, Subject::Part(p)))
                    .or_else(|| rule.matching(&self.call, Subject::Whole))
                    .map(str::to_string)
            }
        }
    }

    /// For each subject an allow must cover, the rules (and their patterns) that do, the
    /// first that covers it chosen; `None` if some subject is not covered (or a shell call
    /// could not be split confidently).
    fn all<'r>(&self, rules: &[&'r Rule]) -> Option<Vec<(&'r Rule, String)>> {
        match &self.shell {
            None => rules
                .iter()
                .find_map(|r| {
                    r.matching(&self.call, Subject::Whole)
                        .map(|p| (*r, p.to_string()))
                })
                .map(|hit| vec![hit]),
            Some((None, _)) => None,
            Some((Some(parts), _)) => parts
                .iter()
                .map(|part| {
                    rules
                        .iter()
                        .find_map(|r| r.allowing(&self.call, part).map(|p| (*r, p.to_string())))
                })
                .collect(),
        }
    }
}

impl Policy {
    /// A policy of `rules`, in their order.
    pub fn new(rules: Vec<Rule>) -> Self {
        Self { rules }
    }

    /// The rules.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// Whether there is nothing to weigh.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The quorum the live ask rules matching `i` ask for: the stricter of them (see
    /// [`Quorum::stricter`]); `None` when none matching asks for one.
    pub fn quorum_for(&self, i: &Interaction) -> Option<Quorum> {
        let asking: Vec<&Rule> = self
            .rules
            .iter()
            .filter(|r| r.quorum.is_some() && r.mode == Mode::Live && r.applies(i))
            .collect();
        if asking.is_empty() {
            return None;
        }
        let input = i.input.map();
        let subjects = Subjects::of(i, &input);
        asking
            .into_iter()
            .filter(|r| subjects.any(r).is_some())
            .fold(None, |q, r| Quorum::stricter(q, r.quorum))
    }

    /// Whether a live ask rule matching `i` asks for a passkey (`step_up`).
    pub fn step_up_for(&self, i: &Interaction) -> bool {
        let asking: Vec<&Rule> = self
            .rules
            .iter()
            .filter(|r| r.step_up && r.mode == Mode::Live && r.applies(i))
            .collect();
        if asking.is_empty() {
            return false;
        }
        let input = i.input.map();
        let subjects = Subjects::of(i, &input);
        asking.into_iter().any(|r| subjects.any(r).is_some())
    }

    /// Weighs `i` against the rules and `grants` (allow rules of their own).
    pub fn evaluate(&self, i: &Interaction, grants: &[Rule]) -> Evaluation {
        let mut out = Evaluation::default();
        if self.rules.is_empty() && grants.is_empty() {
            return out;
        }
        let input = i.input.map();
        let subjects = Subjects::of(i, &input);
        let applying: Vec<&Rule> = self.rules.iter().filter(|r| r.applies(i)).collect();
        let live = |d: Decision| {
            applying
                .iter()
                .copied()
                .filter(move |r| r.mode == Mode::Live && r.decision == d)
        };
        for decision in [Decision::Deny, Decision::Ask] {
            if out.live.is_none() {
                out.live = live(decision).find_map(|r| subjects.any(r).map(|p| Decided::of(r, &p)));
            }
        }
        if out.live.is_none() {
            let allowing: Vec<&Rule> = live(Decision::Allow)
                .chain(
                    grants
                        .iter()
                        .filter(|g| g.decision == Decision::Allow && g.applies(i)),
                )
                .collect();
            out.live = subjects.all(&allowing).and_then(combine);
        }
        for r in applying.iter().filter(|r| r.mode == Mode::Shadow) {
            let hit = match r.decision {
                Decision::Allow => subjects.all(&[r]).and_then(combine),
                _ => subjects.any(r).map(|p| Decided::of(r, &p)),
            };
            out.shadow.extend(hit);
        }
        out
    }
}

/// One decision from the allow rules that covered each part: named by every rule used.
fn combine(hits: Vec<(&Rule, String)>) -> Option<Decided> {
    let mut names: Vec<&str> = Vec::new();
    let mut patterns: Vec<&str> = Vec::new();
    for (r, p) in &hits {
        if !names.contains(&r.name.as_str()) {
            names.push(&r.name);
        }
        if !p.is_empty() && !patterns.contains(&p.as_str()) {
            patterns.push(p);
        }
    }
    let first = hits.first()?.0;
    Some(Decided {
        decision: Decision::Allow,
        rule: names.join(", "),
        pattern: patterns.join(" + "),
        mode: first.mode,
        message: None,
        grant: first.grant.clone(),
    })
}

#[cfg(test)]
mod tests;
