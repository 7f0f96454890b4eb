//! Policy rules at creation: the rules (and grants) are weighed before anything is planned or
//! sent; an allow or deny resolves the interaction in the same write that creates it, with
//! `via = "policy"` and the rule's name as who decided.

use std::sync::Arc;

use super::records::{clip, created_record, log_resolution, resolved_record};
use super::{Created, Registry, RegistryError};
use crate::interaction::ValidationError;
use crate::interaction::answer::{self, Answer, Responder};
use crate::interaction::events::EventKind;
use crate::interaction::model::{Interaction, Resolution, Via, now};
use crate::interaction::policy::{Decided, Decision, Evaluation, Mode, Policy, Rule};
use crate::interaction::ports::audit::{Action, AuditRecord};
use crate::interaction::ports::{CreateOutcome, Effects};
use crate::sync::RwLockExt;

/// The channel name of decisions taken by policy rules and grants.
pub const POLICY_VIA: &str = "policy";

impl Registry {
    /// Replaces the policy rules weighed at creation.
    pub fn set_policy(&self, policy: Policy) {
        *self.inner.policy.writing() = Arc::new(policy);
    }

    /// The policy rules weighed at creation.
    pub fn policy(&self) -> Arc<Policy> {
        self.inner.policy.reading().clone()
    }

    /// Replaces the live grants (allow rules from people's answers) weighed at creation
    /// after the configured rules.
    pub fn set_grants(&self, grants: Vec<Rule>) {
        *self.inner.grants.writing() = Arc::new(grants);
    }

    /// The live grants weighed at creation.
    pub fn grants(&self) -> Arc<Vec<Rule>> {
        self.inner.grants.reading().clone()
    }

    /// What the rules and grants decide about `i`.
    pub async fn weigh(&self, i: &Interaction) -> Evaluation {
        let policy = self.policy();
        let grants = self.grant_rules(i).await;
        let mut evaluation = policy.evaluate(i, &grants);
        // An approval that needs several people is allowed only by them: no rule or grant
        // allows it (one person's "allow similar" elsewhere must not stand for the quorum).
        if i.quorum().is_some()
            && evaluation
                .live
                .as_ref()
                .is_some_and(|d| d.decision == Decision::Allow)
        {
            evaluation.live = None;
        }
        evaluation
    }

    /// Creates `interaction` resolved as rule `d` decided: one write, nothing planned for any
    /// channel. Re-attaching to an existing id behaves as for any creation.
    pub(super) async fn create_decided(
        &self,
        interaction: Arc<Interaction>,
        d: &Decided,
        evaluation: &Evaluation,
    ) -> Result<Created, RegistryError> {
        let resolution = decided_resolution(&interaction, d)?;
        let resolved = Arc::new(interaction.resolved(resolution));
        let audit = if self.inner.config.audit {
            let mut audit = vec![created_record(&interaction)];
            audit.extend(policy_records(&interaction, evaluation));
            if let Some(r) = &resolved.resolution {
                let mut record = resolved_record(&resolved, r, Some(&d.rule));
                if record.detail.is_none() {
                    record.detail = Some(clip(&describe(d)));
                }
                audit.push(record);
            }
            audit
        } else {
            Vec::new()
        };
        let effects = Effects {
            jobs: Vec::new(),
            audit,
        };
        match self.inner.store.create(resolved.clone(), effects).await? {
            CreateOutcome::Created => {
                self.publish(EventKind::Resolved, resolved.clone());
                log_decision(&resolved, d);
                log_resolution(&resolved, "interaction decided by policy");
                self.report_policy(&resolved, evaluation);
                for h in self.hooks().iter() {
                    h.created(&resolved);
                    h.resolved(&resolved);
                }
                Ok(Created {
                    interaction: resolved,
                    created: true,
                })
            }
            CreateOutcome::Exists(existing) => {
                if existing.is_pending()
                    && existing.same_request(&interaction.tool_name, &interaction.input)
                {
                    self.adopt(existing.clone()).await?;
                }
                Self::reattach(existing, &interaction)
            }
        }
    }

    /// Logs every decision of `evaluation` and tells the hooks (metrics).
    pub(super) fn report_policy(&self, i: &Interaction, evaluation: &Evaluation) {
        let hooks = self.hooks();
        for d in evaluation.live.iter().chain(&evaluation.shadow) {
            if d.mode == Mode::Shadow || d.decision == Decision::Ask {
                log_decision(i, d);
            }
            for h in hooks.iter() {
                h.policy(i, d);
            }
        }
    }
}

/// The resolution rule `d` gives `i`: the input unchanged, or the rule's deny message.
fn decided_resolution(i: &Interaction, d: &Decided) -> Result<Resolution, ValidationError> {
    let answer = match d.decision {
        Decision::Allow => Answer::allow(),
        _ => Answer::deny(Some(d.deny_message())),
    };
    answer::resolution_for(
        i,
        answer,
        Responder::new(&d.rule, Via::new(POLICY_VIA)),
        now(),
    )
}

/// `rule "name": Pattern` (and the grant), for logs and audit details.
pub fn describe(d: &Decided) -> String {
    let mut s = format!("rule {:?}", d.rule);
    if !d.pattern.is_empty() {
        s.push_str(": ");
        s.push_str(&d.pattern);
    }
    if let Some(g) = &d.grant {
        s.push_str(&format!(" (grant {g})"));
    }
    s
}

/// The audit outcome of a decision: `allow`, or `would_allow` for a shadow rule.
pub fn audit_outcome(d: &Decided) -> String {
    match d.mode {
        Mode::Live => d.decision.as_str().to_string(),
        Mode::Shadow => format!("would_{}", d.decision.as_str()),
    }
}

/// The audit records of every decision in `evaluation`.
pub(super) fn policy_records(i: &Interaction, evaluation: &Evaluation) -> Vec<AuditRecord> {
    evaluation
        .live
        .iter()
        .chain(&evaluation.shadow)
        .map(|d| AuditRecord {
            at: i.created_at,
            action: Action::Policy,
            interaction_id: Some(i.id.as_str().to_string()),
            actor: Some(clip(&d.rule)),
            channel: POLICY_VIA.into(),
            outcome: audit_outcome(d),
            input_hash: Some(i.input_digest()),
            detail: Some(clip(&describe(d))),
        })
        .collect()
}

fn log_decision(i: &Interaction, d: &Decided) {
    tracing::info!(
        id = %i.id,
        tool = %i.tool_name,
        rule = d.rule.as_str(),
        pattern = d.pattern.as_str(),
        decision = d.decision.as_str(),
        mode = d.mode.as_str(),
        grant = d.grant.as_deref().unwrap_or(""),
        "{}",
        match (d.mode, d.decision) {
            (Mode::Shadow, _) => "shadow policy rule matched (not applied)",
            (Mode::Live, Decision::Ask) => "policy rule asks a person",
            (Mode::Live, _) => "policy rule decided",
        }
    );
}
