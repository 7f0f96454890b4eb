//! `[[policy]]`: the policy rules, read and checked here, compiled into the core's
//! [`Policy`]. Every pattern is compiled at start-up (and by `imrelay check-config`), so a
//! pattern that cannot be read is refused with its rule, field and position.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use crate::interaction::Kind;
use crate::interaction::policy::{Decision, Mode, Policy, Rule, RuleSpec};

/// One `[[policy]]` table.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyRuleSettings {
    /// The rule's name: in audit entries, logs, metrics and what people see.
    pub name: String,
    /// Permission patterns in Claude Code's syntax (`Bash(git status:*)`, `Read(./src/**)`,
    /// `WebFetch(domain:docs.rs)`, `mcp__github__*`); any matching is enough. Empty: every
    /// tool.
    #[serde(
        default,
        alias = "tool",
        deserialize_with = "crate::settings::one_or_many"
    )]
    pub tools: Vec<String>,
    /// `allow`, `deny` or `ask`.
    #[serde(default = "ask")]
    pub decision: Decision,
    /// For a deny: the message the agent receives.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// `live` (decides) or `shadow` (logs and audits what it would have decided).
    #[serde(default)]
    pub mode: Mode,
    /// Only interactions of these kinds (`approval`, `question`, `form`); empty: every kind.
    #[serde(default, deserialize_with = "crate::settings::one_or_many")]
    pub kind: Vec<Kind>,
    /// Only calls from these agents (globs over the agent's label); empty: any.
    #[serde(default, deserialize_with = "crate::settings::one_or_many")]
    pub agent: Vec<String>,
    /// Only calls whose working directory matches one of these globs (`/srv/app/**`); empty:
    /// any.
    #[serde(default, deserialize_with = "crate::settings::one_or_many")]
    pub cwd: Vec<String>,
    /// Only interactions that took one of these routes (`[[routes]]` names, or `default`);
    /// empty: any.
    #[serde(default, deserialize_with = "crate::settings::one_or_many")]
    pub route: Vec<String>,
    /// For an ask rule: how many different people must allow what it matches (the
    /// two-person rule: 2); unset: one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quorum: Option<u32>,
    /// With `quorum`: how many different people's denies deny it; unset: one deny denies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deny_quorum: Option<u32>,
    /// For an ask rule: answers count only with a passkey assertion made in the inbox.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub step_up: bool,
}

fn ask() -> Decision {
    Decision::Ask
}

impl PolicyRuleSettings {
    /// A live rule named `name` that makes `decision` for calls matching any of `tools`, with
    /// every other field as a `[[policy]]` table that names only those three reads.
    pub fn new(name: &str, decision: Decision, tools: &[&str]) -> Self {
        Self {
            name: name.to_string(),
            tools: tools.iter().map(|t| t.to_string()).collect(),
            decision,
            message: None,
            mode: Mode::Live,
            kind: Vec::new(),
            agent: Vec::new(),
            cwd: Vec::new(),
            route: Vec::new(),
            quorum: None,
            deny_quorum: None,
            step_up: false,
        }
    }

    fn spec(&self) -> RuleSpec {
        RuleSpec {
            name: self.name.clone(),
            tools: self.tools.clone(),
            kinds: self.kind.clone(),
            agents: self.agent.clone(),
            cwds: self.cwd.clone(),
            session: None,
            routes: self.route.clone(),
            decision: Some(self.decision),
            message: self.message.clone(),
            mode: self.mode,
            quorum: self.quorum,
            deny_quorum: self.deny_quorum,
            step_up: self.step_up,
        }
    }
}

/// Compiles the rules, or says which one is wrong, where and why.
pub fn compile(rules: &[PolicyRuleSettings]) -> Result<Policy, String> {
    let mut names = HashSet::new();
    let mut compiled = Vec::with_capacity(rules.len());
    for (k, r) in rules.iter().enumerate() {
        let rule = Rule::new(r.spec())
            .map_err(|e| format!("policy[{k}] ({:?}): {}: {}", r.name, e.field, e.message))?;
        if !names.insert(rule.name().to_string()) {
            return Err(format!(
                "policy[{k}]: the name {:?} is used by an earlier rule; rule names must be unique",
                r.name
            ));
        }
        compiled.push(rule);
    }
    Ok(Policy::new(compiled))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(toml_text: &str) -> Vec<PolicyRuleSettings> {
        #[derive(Deserialize)]
        struct File {
            policy: Vec<PolicyRuleSettings>,
        }
        toml::from_str::<File>(toml_text).unwrap().policy
    }

    #[test]
    fn rules_compile_and_bad_ones_name_their_position() {
        let ok = rules(
            r#"
[[policy]]
name = "git"
tools = ["Bash(git status:*)", "Read(./src/**)"]
decision = "allow"

[[policy]]
name = "no-rm"
tools = ["Bash(rm:*)"]
decision = "deny"
message = "Use the trash instead."
mode = "shadow"
agent = ["claude-code"]
cwd = ["/srv/**"]
kind = ["approval"]
"#,
        );
        let p = compile(&ok).unwrap();
        assert_eq!(p.rules().len(), 2);
        assert_eq!(p.rules()[1].mode(), Mode::Shadow);

        let bad = rules(
            "[[policy]]\nname = \"x\"\ntools = [\"Bash(ls:*)\", \"Bash(git status\"]\ndecision = \"allow\"",
        );
        let e = compile(&bad).unwrap_err();
        assert_eq!(
            e,
            "policy[0] (\"x\"): tools[1]: \"Bash(git status\" at character 15: the specifier is not closed: end the pattern with `)`"
        );
        let twice = rules("[[policy]]\nname = \"x\"\n[[policy]]\nname = \"x\"");
        assert!(
            compile(&twice)
                .unwrap_err()
                .contains("used by an earlier rule")
        );
        let home = rules("[[policy]]\nname = \"h\"\ntools = [\"Read(~/x)\"]\ndecision = \"allow\"");
        assert!(compile(&home).unwrap_err().contains("home directory"));
    }

    #[test]
    fn a_quorum_goes_with_an_ask_rule() {
        let ok = rules(
            "[[policy]]\nname = \"force-push\"\ntools = [\"Bash(git push --force:*)\"]\nquorum = 2",
        );
        assert!(compile(&ok).is_ok());
        let allow = rules("[[policy]]\nname = \"a\"\ndecision = \"allow\"\nquorum = 2");
        assert_eq!(
            compile(&allow).unwrap_err(),
            "policy[0] (\"a\"): quorum: only an ask rule takes a quorum: people decide what it matches"
        );
        let alone = rules("[[policy]]\nname = \"d\"\ndeny_quorum = 2");
        assert!(compile(&alone).unwrap_err().contains("goes with quorum"));
        let zero = rules("[[policy]]\nname = \"z\"\nquorum = 0");
        assert!(compile(&zero).unwrap_err().contains("at least 1"));
    }
}
