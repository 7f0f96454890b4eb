//! Grants at the registry: created from a person's answer ("allow this and similar calls"),
//! revoked, and weighed with the policy at creation. A process that alone writes its store
//! keeps the grants in force in memory; processes sharing a store read them from it whenever
//! they weigh an approval, so a grant made or revoked on one replica counts on every other
//! at once.

use std::sync::Arc;
use std::time::Duration;

use super::records::clip;
use super::{Registry, RegistryError};
use crate::interaction::ValidationError;
use crate::interaction::answer::{Answer, Responder};
use crate::interaction::model::{Interaction, InteractionId, Kind, after, now};
use crate::interaction::policy::{Grant, GrantScope, Rule, check_rule, propose};
use crate::interaction::ports::audit::{Action, AuditRecord};
use crate::interaction::routes::{Admission, DEFAULT_ROUTE, route_admission, route_name};
use crate::sync::RwLockExt;

/// What a person asks for with "allow this and similar calls".
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GrantRequest {
    /// The pattern to allow; `None`: the one imrelay proposes from the call.
    pub rule: Option<String>,
    /// Session or standing.
    pub scope: GrantScope,
}

/// Longest grant pattern, in characters.
const MAX_RULE: usize = 1000;

/// Who asks to make or revoke a grant.
#[derive(Clone, Debug)]
pub enum Grantor {
    /// An administrator's token (an operator token without a label): any grant, on any
    /// route or on all of them, and any revocation.
    Administrator(Responder),
    /// A person (a labelled operator token, a chat identity), on the channel's own approver
    /// list or not (`listed`): grants only on a route they approve, and revokes their own
    /// grants and those on a route they approve.
    Person {
        /// Who they are and where they answer from; their identity decides.
        responder: Responder,
        /// Whether the channel lists them as an approver (an operator token always is).
        listed: bool,
    },
}

impl Grantor {
    /// Who asks, for the audit trail.
    pub fn responder(&self) -> &Responder {
        match self {
            Grantor::Administrator(r) | Grantor::Person { responder: r, .. } => r,
        }
    }
}

impl Registry {
    /// How long a session grant lasts.
    fn session_grant_ttl(&self) -> Duration {
        self.inner.config.session_grant_ttl
    }

    /// The grant `request` describes for interaction `i`, answered by `responder`: checked,
    /// not yet recorded.
    pub fn grant_for(
        &self,
        i: &Interaction,
        request: &GrantRequest,
        responder: &Responder,
    ) -> Result<Grant, ValidationError> {
        if i.kind != Kind::Approval {
            return Err(ValidationError::new(
                "grant",
                "only an approval can be allowed with similar calls",
            ));
        }
        let rule = match &request.rule {
            Some(r) if !r.trim().is_empty() => r.trim().to_string(),
            _ => propose(i).ok_or_else(|| {
                ValidationError::new(
                    "grant.rule",
                    "no rule can be proposed for this call (a compound command?): write one",
                )
            })?,
        };
        if rule.chars().count() > MAX_RULE {
            return Err(ValidationError::new(
                "grant.rule",
                format!("is longer than {MAX_RULE} characters"),
            ));
        }
        check_rule(&rule).map_err(|e| ValidationError::new("grant.rule", e.message))?;
        let at = now();
        let (session, expires_at, owner) = match request.scope {
            GrantScope::Session => {
                let Some(s) = i.session.as_deref() else {
                    return Err(ValidationError::new(
                        "grant.scope",
                        "this call names no session: grant it as \"standing\"",
                    ));
                };
                (
                    Some(s.to_string()),
                    Some(after(at, self.session_grant_ttl())),
                    // The session is the agent's token's: another token may name it too.
                    i.owner.as_deref().map(str::to_string),
                )
            }
            GrantScope::Standing => (None, None, None),
        };
        let grant = Grant {
            id: uuid::Uuid::now_v7().to_string(),
            rule,
            scope: request.scope,
            session,
            agent: i.agent.as_deref().map(str::to_string),
            cwd: i.cwd.as_deref().map(str::to_string),
            by: responder.by.clone(),
            via: responder.via.as_str().to_string(),
            interaction_id: Some(i.id.as_str().to_string()),
            owner,
            // The route the answer was admitted on: the grant covers nothing beyond it.
            route: Some(route_name(i).to_string()),
            grantor: self.person_behind(responder),
            created_at: at,
            expires_at,
        };
        // The grant must at least allow the call it came from, or it says something else.
        let allows = grant
            .to_rule()
            .map(|r| self.policy().evaluate(i, std::slice::from_ref(&r)).live)
            .map_err(|e| ValidationError::new("grant.rule", e.message))?;
        if allows.is_none_or(|d| d.grant.is_none()) {
            return Err(ValidationError::new(
                "grant.rule",
                format!(
                    "{:?} does not allow this call itself (or a policy rule asks or denies it)",
                    grant.rule
                ),
            ));
        }
        Ok(grant)
    }

    /// Answers interaction `id` with an allow and records the grant `request` describes:
    /// the grant is recorded only if this answer won.
    pub async fn respond_granting(
        &self,
        id: &InteractionId,
        answer: Answer,
        responder: Responder,
        request: &GrantRequest,
    ) -> Result<(Arc<Interaction>, Grant), RegistryError> {
        if !matches!(answer, Answer::Allow { .. }) {
            return Err(ValidationError::new("grant", "goes with decision \"allow\"").into());
        }
        let responder = self.attribute(responder);
        let current = self
            .get(id)
            .await?
            .ok_or_else(|| RegistryError::NotFound(id.clone()))?;
        if crate::interaction::quorum::is_voted(&current) {
            // One person would allow, for later calls, what needs several people now.
            return Err(ValidationError::new(
                "grant",
                "this approval needs several people: it cannot grant similar calls",
            )
            .into());
        }
        if crate::interaction::routes::needs_step_up(&current) {
            // Later calls would be allowed without the passkey this one needs.
            return Err(ValidationError::new(
                "grant",
                "this approval needs a passkey: it cannot grant similar calls",
            )
            .into());
        }
        let grant = self.grant_for(&current, request, &responder)?;
        // The agent's own form of it, where it offers one (Claude Code's permission
        // suggestions): applied too, for its session, when it is a scoped rule. One that
        // would outlive the session (OpenCode's "always") or cover a whole tool (an ACP
        // agent's "always") would allow more than the grant says: not applied.
        let session_scoped = current
            .suggestions
            .as_deref()
            .is_some_and(crate::interaction::applied_with_a_grant);
        let answer = match answer {
            Answer::Allow { updated_input, .. } if session_scoped => Answer::Allow {
                updated_input,
                always: true,
            },
            other => other,
        };
        let resolved = self.respond(id, answer, responder).await?;
        let grant = self.record_grant(grant).await?;
        Ok((resolved, grant))
    }

    /// Records `grant`, a standing grant made without a call to answer, if `grantor` may make
    /// it: an administrator any grant; a person only on a route they approve, which the grant
    /// must name (it then covers that route alone). A refusal is recorded in the audit trail
    /// and answered [`RegistryError::Forbidden`].
    pub async fn add_grant(
        &self,
        mut grant: Grant,
        grantor: &Grantor,
    ) -> Result<Grant, RegistryError> {
        self.check_grant_route(&grant)?;
        if let Grantor::Person { responder, listed } = grantor {
            let Some(route) = grant.route.clone() else {
                return Err(ValidationError::new(
                    "route",
                    "name the route this grant is for: a person's grant covers only a route they approve",
                )
                .into());
            };
            if !self.approves(&route, responder, *listed) {
                let why = format!("not an approver of route {route:?}: may not grant on it");
                self.refuse_grant(grantor, None, &why).await?;
                return Err(RegistryError::Forbidden(format!(
                    "{} may not grant on route {route:?}: only its approvers (and administrators) may",
                    responder.by.as_deref().unwrap_or("this person")
                )));
            }
            grant.grantor = self.person_behind(responder);
        } else {
            grant.grantor = None;
        }
        self.record_grant(grant).await
    }

    /// A grant's route exists, and a grant could allow its calls (not a route whose approvals
    /// need several people).
    fn check_grant_route(&self, grant: &Grant) -> Result<(), ValidationError> {
        let Some(route) = grant.route.as_deref() else {
            return Ok(());
        };
        let teams = self.teams();
        if teams.routes.stamp_named(route).is_none() {
            let names: Vec<&str> = teams
                .routes
                .routes()
                .iter()
                .map(|r| r.name())
                .chain([DEFAULT_ROUTE])
                .collect();
            return Err(ValidationError::new(
                "route",
                format!("no route is named {route:?} (routes: {})", names.join(", ")),
            ));
        }
        if let Some(q) = teams.routes.get(route).and_then(|r| r.quorum())
            && q.allow > 1
        {
            return Err(ValidationError::new(
                "route",
                format!(
                    "route {route:?} needs {} people to allow its approvals: a grant, one person's, would never allow its calls",
                    q.allow
                ),
            ));
        }
        Ok(())
    }

    /// Whether `responder` (on the channel's approver list or not, `listed`) may answer what
    /// takes route `route` as it is now configured.
    pub(super) fn approves(&self, route: &str, responder: &Responder, listed: bool) -> bool {
        let teams = self.teams();
        let (Some(stamp), Some(identity)) =
            (teams.routes.stamp_named(route), responder.identity.as_ref())
        else {
            return false;
        };
        let stamp = (!teams.routes.is_empty()).then_some(&*stamp);
        route_admission(
            stamp,
            &teams.people,
            &identity.channel,
            &identity.id,
            listed,
        ) == Admission::Admitted
    }

    /// The person behind `responder` (see [`Responder::person`]).
    fn person_behind(&self, responder: &Responder) -> Option<String> {
        responder.person(&self.teams().people)
    }

    /// Records a refused grant or revocation in the log and the audit trail.
    async fn refuse_grant(
        &self,
        grantor: &Grantor,
        grant: Option<&Grant>,
        why: &str,
    ) -> Result<(), super::Unrecorded> {
        let r = self.attribute(grantor.responder().clone());
        let reason = match grant {
            Some(g) => format!("grant {}: {why}", g.id),
            None => format!("grant: {why}"),
        };
        self.refused(None, &r.audit_actor().unwrap_or_default(), &r.via, &reason)
            .await
    }

    /// Records `grant` (checked with [`Registry::grant_for`]) with its audit entry.
    async fn record_grant(&self, grant: Grant) -> Result<Grant, RegistryError> {
        grant
            .to_rule()
            .map_err(|e| ValidationError::new("grant.rule", e.message))?;
        let audit = self.grant_record(&grant, Action::Granted, grant.by.clone(), &grant.via);
        self.inner.store.add_grant(grant.clone(), audit).await?;
        tracing::info!(grant = %grant.id, rule = %grant.rule, scope = grant.scope.as_str(),
            by = grant.by.as_deref().unwrap_or(""), via = %grant.via, "grant added");
        self.load_grants().await?;
        Ok(grant)
    }

    /// Revokes grant `id` if `revoker` may: an administrator any grant; a person their own
    /// grants and those on a route they approve. Who and through which channel go into the
    /// audit trail; a refusal is recorded there too and answered
    /// [`RegistryError::Forbidden`].
    pub async fn revoke_grant(&self, id: &str, revoker: &Grantor) -> Result<Grant, RegistryError> {
        let live = self.live_grants().await?;
        let Some(grant) = live.into_iter().find(|g| g.id == id) else {
            return Err(RegistryError::GrantNotFound(id.to_string()));
        };
        if let Grantor::Person { responder, listed } = revoker {
            let own = grant.grantor.is_some() && self.person_behind(responder) == grant.grantor;
            let approver = grant
                .route
                .as_deref()
                .is_some_and(|r| self.approves(r, responder, *listed));
            if !own && !approver {
                let why = match &grant.route {
                    Some(r) => format!("neither its grantor nor an approver of route {r:?}"),
                    None => {
                        "neither its grantor nor an administrator (it covers every route)".into()
                    }
                };
                self.refuse_grant(revoker, Some(&grant), &format!("may not revoke: {why}"))
                    .await?;
                return Err(RegistryError::Forbidden(format!(
                    "{} may not revoke grant {}: {why}",
                    responder.by.as_deref().unwrap_or("this person"),
                    grant.id
                )));
            }
        }
        let r = self.attribute(revoker.responder().clone());
        let (by, via) = (r.by.clone(), &r.via);
        let audit = self.grant_record(&grant, Action::Revoked, by.clone(), via.as_str());
        let revoked = self
            .inner
            .store
            .revoke_grant(id, now(), audit)
            .await?
            .ok_or_else(|| RegistryError::GrantNotFound(id.to_string()))?;
        tracing::info!(grant = %id, rule = %revoked.rule, by = by.as_deref().unwrap_or(""),
            via = %via, "grant revoked");
        self.load_grants().await?;
        Ok(revoked)
    }

    fn grant_record(
        &self,
        grant: &Grant,
        action: Action,
        actor: Option<String>,
        via: &str,
    ) -> Vec<AuditRecord> {
        if !self.inner.config.audit {
            return Vec::new();
        }
        vec![AuditRecord {
            at: now(),
            action,
            interaction_id: grant.interaction_id.clone(),
            actor: actor.map(|a| clip(&a)),
            channel: clip(via),
            outcome: grant.scope.as_str().into(),
            input_hash: None,
            detail: Some(clip(&format!("grant {}: {}", grant.id, grant.rule))),
        }]
    }

    /// The grants in force, oldest first.
    pub async fn live_grants(&self) -> Result<Vec<Grant>, RegistryError> {
        Ok(self.inner.store.live_grants(now()).await?)
    }

    /// Reads the grants in force from the store into memory.
    pub async fn load_grants(&self) -> Result<(), RegistryError> {
        let rules = compile(self.live_grants().await?);
        self.set_grants(rules);
        Ok(())
    }

    /// The grants to weigh now: read from the store when other processes share it (a stale
    /// copy on a failed read, logged), else the copy in memory; expired ones left out.
    pub(super) async fn grant_rules(&self, i: &Interaction) -> Arc<Vec<Rule>> {
        if i.kind != Kind::Approval {
            return Arc::default();
        }
        if self.inner.shared_events {
            match self.live_grants().await {
                Ok(grants) => {
                    let rules = Arc::new(compile(grants));
                    *self.inner.grants.writing() = rules.clone();
                    return rules;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "could not read the grants; weighing the last ones read");
                }
            }
        }
        let held = self.grants();
        let at = now();
        if held.iter().all(|r| r.is_live(at)) {
            held
        } else {
            Arc::new(held.iter().filter(|r| r.is_live(at)).cloned().collect())
        }
    }
}

/// The rules of `grants`, leaving out (and logging) any that no longer compiles.
fn compile(grants: Vec<Grant>) -> Vec<Rule> {
    grants
        .iter()
        .filter_map(|g| match g.to_rule() {
            Ok(r) => Some(r.until(g.expires_at)),
            Err(e) => {
                tracing::error!(grant = %g.id, rule = %g.rule, error = %e, "a stored grant cannot be read; it allows nothing");
                None
            }
        })
        .collect()
}
