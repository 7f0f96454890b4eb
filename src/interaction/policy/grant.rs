//! Grants: "allow this and similar calls", from a person's answer. A grant is an allow rule
//! (one permission pattern) bound to the agent and working directory of the call it came
//! from, and, in session scope, to that session until it expires; standing grants are kept
//! until revoked. [`propose`] suggests the pattern from a call.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::{Decision, Mode, Rule, RuleError, RuleSpec, shell};
use crate::interaction::model::Interaction;

/// How long a grant lasts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GrantScope {
    /// Calls of the same agent session, until it expires.
    Session,
    /// Kept in the store until revoked.
    Standing,
}

impl GrantScope {
    /// `session` or `standing`.
    pub fn as_str(self) -> &'static str {
        match self {
            GrantScope::Session => "session",
            GrantScope::Standing => "standing",
        }
    }
}

fn millis_opt<S: serde::Serializer>(t: &Option<Timestamp>, s: S) -> Result<S::Ok, S::Error> {
    match t {
        Some(t) => crate::interaction::millis(t, s),
        None => s.serialize_none(),
    }
}

/// A grant as kept in the store.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    /// Its id (a UUID v7).
    pub id: String,
    /// The permission pattern it allows (`Bash(npm run test:*)`).
    pub rule: String,
    /// Session or standing.
    pub scope: GrantScope,
    /// The session it is bound to (session scope).
    #[serde(default)]
    pub session: Option<String>,
    /// The agent it is bound to, if the call named one.
    #[serde(default)]
    pub agent: Option<String>,
    /// The working directory it is bound to, if the call named one.
    #[serde(default)]
    pub cwd: Option<String>,
    /// Who granted it.
    #[serde(default)]
    pub by: Option<String>,
    /// Through which channel.
    pub via: String,
    /// The interaction whose answer granted it.
    #[serde(default)]
    pub interaction_id: Option<String>,
    /// The agent token a session grant is bound to (the interaction's
    /// [`Interaction::owner`]): a call naming the same session with another token is not
    /// allowed by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// The route whose calls it covers (the route of the call it came from, or the one a
    /// person named): a grant never reaches past what its grantor may approve. `None`:
    /// every route (an administrator's grant, or one recorded before grants had routes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route: Option<String>,
    /// Who granted it, as a person (a configured person's name, or `channel:id`): they may
    /// revoke it. `None`: an administrator's token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grantor: Option<String>,
    /// When it was granted.
    #[serde(serialize_with = "crate::interaction::millis")]
    pub created_at: Timestamp,
    /// When it ends by itself (session scope).
    #[serde(default, serialize_with = "millis_opt")]
    pub expires_at: Option<Timestamp>,
}

impl Grant {
    /// The name decisions by this grant carry: `grant <rule>`.
    pub fn name(&self) -> String {
        format!("grant {}", self.rule)
    }

    /// Whether it is in force at `now`.
    pub fn is_live(&self, now: Timestamp) -> bool {
        self.expires_at.is_none_or(|t| t > now)
    }

    /// The allow rule it stands for.
    pub fn to_rule(&self) -> Result<Rule, RuleError> {
        Rule::new(RuleSpec {
            name: self.name(),
            tools: vec![self.rule.clone()],
            agents: self.agent.iter().map(|a| globset::escape(a)).collect(),
            cwds: self.cwd.iter().map(|c| globset::escape(c)).collect(),
            session: self.session.clone(),
            routes: self.route.iter().cloned().collect(),
            decision: Some(Decision::Allow),
            mode: Mode::Live,
            ..RuleSpec::default()
        })
        .map(|r| r.for_grant(self.id.clone()).owned_by(self.owner.clone()))
    }
}

/// Checks a pattern offered for a grant, as an allow rule would use it.
pub fn check_rule(rule: &str) -> Result<(), RuleError> {
    Rule::new(RuleSpec {
        name: "grant".into(),
        tools: vec![rule.to_string()],
        decision: Some(Decision::Allow),
        ..RuleSpec::default()
    })
    .map(|_| ())
}

/// Words a command prefix may hold: subcommands, script names.
fn plain(word: &str) -> bool {
    !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'))
        && !word.starts_with('-')
        && !word.contains("..")
}

/// The pattern "this and similar calls" stands for: for a shell command its first words
/// (`Bash(npm run test:*)` from `npm run test -- --watch`), for a file the folder it is in
/// (`Edit(src/**)`), for a fetch its host (`WebFetch(domain:docs.rs)`), else the tool.
/// `None` when nothing narrower than the whole tool fits (a compound command).
pub fn propose(i: &Interaction) -> Option<String> {
    let input = i.input.map();
    let text = |k: &str| input.get(k).and_then(serde_json::Value::as_str);
    match i.tool_name.as_str() {
        "Bash" => {
            let split = shell::split(text("command")?);
            if !split.confident || split.parts.len() != 1 {
                return None;
            }
            let part = &split.parts[0];
            let name = part.first()?;
            if !plain(name) || shell::is_assignment(name) {
                return None;
            }
            let mut words = vec![name.clone()];
            for w in part.iter().skip(1).take(2) {
                if !plain(w) || w.contains('.') || w.contains(':') {
                    break;
                }
                words.push(w.clone());
            }
            Some(format!("Bash({}:*)", words.join(" ")))
        }
        tool @ ("Read" | "Edit" | "Write" | "MultiEdit" | "NotebookEdit") => {
            let path = text("file_path").or_else(|| text("notebook_path"))?;
            let abs = super::pattern::normalise(path, i.cwd.as_deref())?;
            let dir = abs.rsplit_once('/').map(|(d, _)| d).unwrap_or("");
            let family = if tool == "Read" { "Read" } else { "Edit" };
            let cwd = i
                .cwd
                .as_deref()
                .and_then(|c| super::pattern::normalise(c, None));
            let glob_safe = |s: &str| globset::escape(s);
            match cwd.as_deref().and_then(|c| dir.strip_prefix(c)) {
                Some("") => Some(format!("{family}(./**)")),
                Some(rel) if rel.starts_with('/') => {
                    Some(format!("{family}({}/**)", glob_safe(&rel[1..])))
                }
                _ if dir.is_empty() => None,
                _ => Some(format!("{family}(/{}/**)", glob_safe(dir))),
            }
        }
        "WebFetch" => {
            let url = url::Url::parse(text("url")?).ok()?;
            Some(format!("WebFetch(domain:{})", url.host_str()?))
        }
        tool => Some(globset::escape(tool)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interaction::model::{InteractionId, now};
    use serde_json::{Value, json};

    fn call(tool: &str, input: Value, cwd: Option<&str>) -> Interaction {
        let mut i = Interaction::pending(
            InteractionId::generate(),
            tool,
            input.as_object().cloned().unwrap_or_default(),
            now(),
            60,
        );
        i.cwd = cwd.map(Into::into);
        i
    }

    #[test]
    fn a_rule_is_proposed_from_the_call() {
        let bash = |c: &str| propose(&call("Bash", json!({"command": c}), Some("/w")));
        assert_eq!(
            bash("npm run test -- --watch").as_deref(),
            Some("Bash(npm run test:*)")
        );
        assert_eq!(bash("git status -s").as_deref(), Some("Bash(git status:*)"));
        assert_eq!(
            bash("cargo test --lib policy").as_deref(),
            Some("Bash(cargo test:*)")
        );
        assert_eq!(bash("ls").as_deref(), Some("Bash(ls:*)"));
        assert_eq!(
            bash("python3 script.py").as_deref(),
            Some("Bash(python3:*)")
        );
        assert_eq!(bash("git status && make"), None);
        assert_eq!(bash("FOO=1 make"), None);
        assert_eq!(bash("./run.sh x"), None);
        let file = |t: &str, p: &str| propose(&call(t, json!({"file_path": p}), Some("/w/app")));
        assert_eq!(
            file("Edit", "/w/app/src/ui/x.ts").as_deref(),
            Some("Edit(src/ui/**)")
        );
        assert_eq!(file("Write", "docs/a.md").as_deref(), Some("Edit(docs/**)"));
        assert_eq!(file("Read", "/w/app/x.rs").as_deref(), Some("Read(./**)"));
        assert_eq!(
            file("Read", "/etc/hosts").as_deref(),
            Some("Read(//etc/**)")
        );
        assert_eq!(
            file("Edit", "/w/app/a[1]/x").as_deref(),
            Some("Edit(a[[]1[]]/**)")
        );
        let fetch = propose(&call("WebFetch", json!({"url": "https://docs.rs/x"}), None));
        assert_eq!(fetch.as_deref(), Some("WebFetch(domain:docs.rs)"));
        let mcp = propose(&call("mcp__github__get_issue", json!({}), None));
        assert_eq!(mcp.as_deref(), Some("mcp__github__get_issue"));
        for p in [
            bash("npm run test -- --watch"),
            file("Edit", "/w/app/a[1]/x"),
            fetch,
            mcp,
        ] {
            check_rule(&p.unwrap()).unwrap();
        }
    }
}
