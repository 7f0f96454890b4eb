//! `imrelay policy report`: what each policy rule (and grant) decided, or in shadow mode would
//! have decided, over a period, read from the audit trail (`policy` entries). Configured rules
//! that decided nothing are listed with zeros, so a rule that never matches shows up.
//! `imrelay policy starter`: the starter policy, to paste into a configuration.

use std::collections::BTreeMap;

use anyhow::bail;
use jiff::Timestamp;
use serde::Serialize;

use super::{each_entry, on_postgres, parse_since};
use crate::audit::{Action, AuditEntry};
use crate::config::{Backend, Settings};
use crate::store::AuditQuery;
use crate::telemetry::escape;

/// The starter policy (`config/policy-starter.toml`): deny and ask rules for the commands
/// teams fear, printed by `imrelay policy starter`.
pub const STARTER: &str = include_str!("../../config/policy-starter.toml");

/// One rule's counts.
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct RuleCounts {
    /// The rule's name (grants: `grant …`).
    pub rule: String,
    /// `live` or `shadow`.
    pub mode: String,
    /// How many calls it allowed (or would have).
    pub allow: u64,
    /// How many it denied (or would have).
    pub deny: u64,
    /// How many it sent to a person.
    pub ask: u64,
    /// Its last decision, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last: Option<String>,
    /// Whether the configuration names it.
    pub configured: bool,
}

/// Adds one audit entry to `counts` if it is a policy decision.
fn add(counts: &mut BTreeMap<(String, String), RuleCounts>, e: &AuditEntry) {
    let r = &e.record;
    if r.action != Action::Policy {
        return;
    }
    let rule = r.actor.clone().unwrap_or_default();
    let (mode, decision) = match r.outcome.strip_prefix("would_") {
        Some(d) => ("shadow", d),
        None => ("live", r.outcome.as_str()),
    };
    let c = counts
        .entry((rule.clone(), mode.to_string()))
        .or_insert_with(|| RuleCounts {
            rule,
            mode: mode.into(),
            ..RuleCounts::default()
        });
    match decision {
        "allow" => c.allow += 1,
        "deny" => c.deny += 1,
        _ => c.ask += 1,
    }
    c.last = Some(crate::interaction::Millis(r.at).to_string());
}

/// The counts of every policy decision since `since`, with the configured rules.
pub fn report(settings: &Settings, since: Timestamp) -> anyhow::Result<Vec<RuleCounts>> {
    let mut counts = BTreeMap::new();
    if let Ok(policy) = settings.policy() {
        for rule in policy.rules() {
            counts.insert(
                (rule.name().to_string(), rule.mode().as_str().to_string()),
                RuleCounts {
                    rule: rule.name().to_string(),
                    mode: rule.mode().as_str().into(),
                    configured: true,
                    ..RuleCounts::default()
                },
            );
        }
    }
    match settings.store.backend {
        Backend::Sqlite => {
            let conn = super::database(settings)?;
            each_entry(&conn, Some(since), |e| {
                add(&mut counts, e);
                Ok(())
            })?;
        }
        Backend::Postgres => {
            counts = on_postgres(settings, |store| async move {
                let mut after = 0;
                loop {
                    let page = store
                        .audit(&AuditQuery {
                            after_seq: after,
                            since: Some(since),
                            limit: 1000,
                        })
                        .await?;
                    for e in &page {
                        add(&mut counts, e);
                        after = e.seq;
                    }
                    if page.len() < 1000 {
                        return Ok(counts);
                    }
                }
            })?;
        }
        Backend::Memory => bail!(
            "the audit trail of the memory store lives only in the server process: read it through GET /v1/audit"
        ),
    }
    Ok(counts.into_values().collect())
}

/// `imrelay policy report [--since AGE|TIME] [--json]`.
pub fn print_report(settings: &Settings, since: &str, json: bool) -> anyhow::Result<()> {
    let from = parse_since(since, Timestamp::now())?;
    let from = Timestamp::from_millisecond(from.as_millisecond()).unwrap_or(from);
    let rows = report(settings, from)?;
    if json {
        for r in &rows {
            say!("{}", serde_json::to_string(r)?);
        }
        return Ok(());
    }
    say!(
        "Policy decisions since {} ({since}), from the audit trail:",
        crate::interaction::Millis(from)
    );
    say!(
        "{:<28}  {:<6}  {:>7}  {:>7}  {:>7}  last",
        "rule",
        "mode",
        "allow",
        "deny",
        "ask"
    );
    for r in &rows {
        say!(
            "{:<28}  {:<6}  {:>7}  {:>7}  {:>7}  {}{}",
            escape(&r.rule),
            r.mode,
            r.allow,
            r.deny,
            r.ask,
            r.last.as_deref().unwrap_or("-"),
            if r.configured {
                ""
            } else {
                "  (not configured now)"
            }
        );
    }
    let shadow: u64 = rows
        .iter()
        .filter(|r| r.mode == "shadow")
        .map(|r| r.allow + r.deny + r.ask)
        .sum();
    if shadow > 0 {
        say!(
            "Shadow rules decided nothing: the {shadow} decision(s) above are what they would have done."
        );
    }
    Ok(())
}
