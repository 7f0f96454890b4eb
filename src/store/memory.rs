//! An in-memory [`Store`]: everything is lost when the process exits. For tests and
//! throwaway runs (`store.backend = "memory"`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use jiff::Timestamp;
use serde_json::Value;

use super::{
    AuditQuery, BOUND_VALUE_PREFIX, ChannelMessage, ClaimQuota, ClaimedJob, CreateOutcome, Effects,
    EscalateOutcome, JobUpdate, ListQuery, OutboxJob, Page, ResolveOutcome, StatusFilter,
    StoreError, random_secret,
};
use crate::audit::{self, AuditEntry, AuditRecord};
use crate::interaction::ports::SessionChange;
use crate::interaction::quorum::{Ballot, Count, VoteOutcome};
use crate::interaction::sessions::Session;
use crate::interaction::{Interaction, InteractionId};
use crate::store::prelude::*;
use crate::sync::LockExt;
use order::Order;
use trail::Trail;

mod order;
mod trail;

type Map<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

#[derive(Default)]
struct State {
    interactions: Map<InteractionId, Arc<Interaction>>,
    /// Every interaction once, pending and resolved apart, for newest-first listing.
    order: Order,
    messages: Map<(String, String, String), ChannelMessage>,
    jobs: Map<i64, JobRow>,
    job_keys: Map<String, i64>,
    next_job_id: i64,
    secrets: HashMap<String, Vec<u8>>,
    seen: HashMap<(String, String), Timestamp>,
    values: HashMap<String, String>,
    /// The audit trail, kept compact (it holds an entry for every interaction).
    audit: Trail,
    /// Grants, with the time each was revoked.
    grants: Vec<(crate::interaction::policy::Grant, Option<Timestamp>)>,
    /// Agent sessions, by agent and session id.
    sessions: HashMap<(String, String), Session>,
}

#[derive(Clone)]
struct JobRow {
    job: OutboxJob,
    attempts: u32,
    next_at: Timestamp,
    lease_until: Option<Timestamp>,
    /// Bumped by every claim: only the newest claim's result is recorded.
    lease_token: i64,
    finished_at: Option<Timestamp>,
}

impl JobRow {
    /// When it can next be claimed.
    fn claimable_at(&self) -> Timestamp {
        self.lease_until
            .map_or(self.next_at, |l| l.max(self.next_at))
    }
}

impl State {
    fn apply(&mut self, effects: Effects) {
        self.enqueue(effects.jobs);
        self.append_audit(effects.audit);
    }

    fn append_audit(&mut self, records: Vec<AuditRecord>) {
        let last = self
            .audit
            .last()
            .map(|(seq, hash)| audit::AuditHead { seq, hash });
        let recorded = self.values.get(audit::HEAD_KEY).map(String::as_str);
        let Some(appended) = audit::append(last, recorded, records) else {
            return;
        };
        self.values
            .insert(audit::HEAD_KEY.to_string(), appended.head.to_string());
        let interactions = &self.interactions;
        for e in appended.entries {
            self.audit.push(e, |id| {
                interactions.get_key_value(id).map(|(k, _)| k.shared())
            });
        }
    }

    fn enqueue(&mut self, jobs: Vec<OutboxJob>) {
        for job in jobs {
            if self.job_keys.contains_key(&job.key) {
                continue;
            }
            self.next_job_id += 1;
            let id = self.next_job_id;
            self.job_keys.insert(job.key.clone(), id);
            self.jobs.insert(
                id,
                JobRow {
                    // Millisecond precision, as every backend stores times.
                    next_at: Timestamp::from_millisecond(job.not_before.as_millisecond())
                        .unwrap_or(job.not_before),
                    job,
                    attempts: 0,
                    lease_until: None,
                    lease_token: 0,
                    finished_at: None,
                },
            );
        }
    }
}

/// The in-memory store.
#[derive(Default)]
pub struct MemoryStore {
    // A std mutex: every operation is a short, synchronous map update; no await while held.
    state: Mutex<State>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.locked()
    }
}

#[async_trait]
impl InteractionStore for MemoryStore {
    async fn create(
        &self,
        interaction: Arc<Interaction>,
        effects: Effects,
    ) -> Result<CreateOutcome, StoreError> {
        let mut st = self.lock();
        if let Some(existing) = st.interactions.get(&interaction.id) {
            return Ok(CreateOutcome::Exists(existing.clone()));
        }
        st.order.insert(&interaction);
        st.interactions
            .insert(interaction.id.clone(), interaction.clone());
        st.apply(effects);
        Ok(CreateOutcome::Created)
    }

    async fn resolve(
        &self,
        resolved: Arc<Interaction>,
        effects: Effects,
    ) -> Result<ResolveOutcome, StoreError> {
        let mut st = self.lock();
        let Some(current) = st.interactions.get(&resolved.id) else {
            return Ok(ResolveOutcome::NotFound);
        };
        if !current.is_pending() {
            return Ok(ResolveOutcome::AlreadyResolved(current.clone()));
        }
        let marked = current.escalated_at();
        let current = current.clone();
        st.order.resolve(&current);
        // The escalation mark stays, whatever copy the resolution was made from.
        let resolved = match (resolved.escalated_at(), marked) {
            (None, Some(at)) => {
                let mut marked = (*resolved).clone();
                marked.set_escalated_at(Some(at));
                Arc::new(marked)
            }
            _ => resolved,
        };
        st.interactions.insert(resolved.id.clone(), resolved);
        st.apply(effects);
        Ok(ResolveOutcome::Resolved)
    }

    async fn vote(&self, ballot: Ballot) -> Result<VoteOutcome, StoreError> {
        let mut st = self.lock();
        let stored = st.interactions.get(&ballot.interaction.id).cloned();
        let (updated, effects, decided) = match ballot.count(stored.as_ref()) {
            Count::Refused(outcome) => return Ok(outcome),
            Count::Recorded(i) => (Arc::new(i), ballot.recorded_effects, false),
            Count::Decided(i) => (Arc::new(i), ballot.decided_effects, true),
        };
        if decided {
            st.order.resolve(&updated);
        }
        st.interactions.insert(updated.id.clone(), updated.clone());
        st.apply(effects);
        Ok(if decided {
            VoteOutcome::Decided(updated)
        } else {
            VoteOutcome::Recorded(updated)
        })
    }

    async fn escalate(
        &self,
        escalated: Arc<Interaction>,
        effects: Effects,
    ) -> Result<EscalateOutcome, StoreError> {
        let mut st = self.lock();
        let Some(current) = st.interactions.get(&escalated.id) else {
            return Ok(EscalateOutcome::NotFound);
        };
        if !current.is_pending() || current.escalated_at().is_some() {
            return Ok(EscalateOutcome::Unchanged(current.clone()));
        }
        // The votes recorded meanwhile are kept.
        let votes = current.votes().to_vec();
        let mut escalated = (*escalated).clone();
        escalated.set_votes(votes);
        let escalated = Arc::new(escalated);
        st.interactions.insert(escalated.id.clone(), escalated);
        st.apply(effects);
        Ok(EscalateOutcome::Escalated)
    }

    async fn get(&self, id: &InteractionId) -> Result<Option<Arc<Interaction>>, StoreError> {
        Ok(self.lock().interactions.get(id).cloned())
    }

    async fn list(&self, query: &ListQuery) -> Result<Page, StoreError> {
        let st = self.lock();
        let before = query.after.as_ref().map(|c| (c.created_ms, &c.id));
        let mut out = Vec::with_capacity(query.limit.min(1024));
        for id in st.order.newest_first(query.status, before) {
            let Some(i) = st.interactions.get(id) else {
                continue;
            };
            if !query.status.matches(i) {
                continue;
            }
            out.push(i.clone());
            if out.len() > query.limit {
                break;
            }
        }
        Ok(Page::from_overfetch(out, query.limit))
    }

    async fn pending(&self) -> Result<Vec<Arc<Interaction>>, StoreError> {
        let st = self.lock();
        let mut pending: Vec<Arc<Interaction>> = st
            .order
            .newest_first(StatusFilter::Pending, None)
            .filter_map(|id| st.interactions.get(id).cloned())
            .collect();
        // Oldest first, as it always listed them.
        pending.reverse();
        Ok(pending)
    }

    async fn prune(&self, before: Timestamp) -> Result<u64, StoreError> {
        let mut st = self.lock();
        let doomed: Vec<Arc<Interaction>> = st
            .interactions
            .values()
            .filter(|i| i.resolution.as_ref().is_some_and(|r| r.at < before))
            .cloned()
            .collect();
        for i in &doomed {
            st.interactions.remove(&i.id);
            st.order.remove_resolved(i);
        }
        let ids: std::collections::HashSet<&InteractionId> = doomed.iter().map(|i| &i.id).collect();
        st.messages.retain(|_, m| !ids.contains(&m.interaction_id));
        let finished: Vec<i64> = st
            .jobs
            .iter()
            .filter(|(_, r)| r.finished_at.is_some_and(|t| t < before))
            .map(|(id, _)| *id)
            .collect();
        for id in finished {
            if let Some(row) = st.jobs.remove(&id) {
                st.job_keys.remove(&row.job.key);
            }
        }
        let now = Timestamp::now();
        st.seen.retain(|_, exp| *exp > now);
        st.sessions.retain(|_, s| s.last_activity >= before);
        // Grants revoked or expired before the horizon.
        st.grants.retain(|(g, revoked)| {
            revoked.is_none_or(|t| t >= before) && g.expires_at.is_none_or(|t| t >= before)
        });
        let State {
            values,
            interactions,
            ..
        } = &mut *st;
        values.retain(|k, v| {
            !k.starts_with(BOUND_VALUE_PREFIX)
                || InteractionId::parse(v).is_ok_and(|id| interactions.contains_key(&id))
        });
        Ok(doomed.len() as u64)
    }
}

#[async_trait]
impl ChannelStore for MemoryStore {
    async fn record_message(&self, message: ChannelMessage) -> Result<(), StoreError> {
        let k = (
            message.channel.clone(),
            message.address.clone(),
            message.message_ref.clone(),
        );
        self.lock().messages.insert(k, message);
        Ok(())
    }

    async fn messages(
        &self,
        channel: &str,
        id: &InteractionId,
    ) -> Result<Vec<ChannelMessage>, StoreError> {
        let st = self.lock();
        let mut v: Vec<ChannelMessage> = st
            .messages
            .values()
            .filter(|m| m.channel == channel && &m.interaction_id == id)
            .cloned()
            .collect();
        v.sort_by(|a, b| (a.created_at, &a.address).cmp(&(b.created_at, &b.address)));
        Ok(v)
    }

    async fn message(
        &self,
        channel: &str,
        address: &str,
        message_ref: &str,
    ) -> Result<Option<ChannelMessage>, StoreError> {
        let k = (
            channel.to_string(),
            address.to_string(),
            message_ref.to_string(),
        );
        Ok(self.lock().messages.get(&k).cloned())
    }

    async fn set_message_state(
        &self,
        channel: &str,
        address: &str,
        message_ref: &str,
        state: Option<Value>,
    ) -> Result<bool, StoreError> {
        let k = (
            channel.to_string(),
            address.to_string(),
            message_ref.to_string(),
        );
        match self.lock().messages.get_mut(&k) {
            Some(m) => {
                m.state = state;
                Ok(true)
            }
            None => Ok(false),
        }
    }
}

#[async_trait]
impl OutboxStore for MemoryStore {
    async fn enqueue(&self, jobs: Vec<OutboxJob>) -> Result<(), StoreError> {
        self.lock().enqueue(jobs);
        Ok(())
    }

    async fn claim_jobs(
        &self,
        now: Timestamp,
        quota: &ClaimQuota,
        lease: Duration,
    ) -> Result<Vec<ClaimedJob>, StoreError> {
        let mut st = self.lock();
        let lease_until = now
            .checked_add(jiff::SignedDuration::try_from(lease).unwrap_or_default())
            .unwrap_or(now);
        let ids: Vec<i64> = {
            let mut due: Vec<(Timestamp, i64, &str)> = st
                .jobs
                .iter()
                .filter(|(_, r)| r.finished_at.is_none() && r.claimable_at() <= now)
                .map(|(id, r)| (r.next_at, *id, r.job.channel.as_str()))
                .collect();
            due.sort();
            let mut taken: HashMap<&str, usize> = HashMap::new();
            due.into_iter()
                .filter(|(_, _, channel)| {
                    let n = taken.entry(channel).or_default();
                    *n += 1;
                    *n <= quota.limit(channel)
                })
                .map(|(_, id, _)| id)
                .collect()
        };
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(r) = st.jobs.get_mut(&id) {
                r.lease_until = Some(lease_until);
                r.lease_token += 1;
                out.push(ClaimedJob {
                    id,
                    lease: r.lease_token,
                    attempts: r.attempts,
                    job: r.job.clone(),
                });
            }
        }
        Ok(out)
    }

    async fn finish_job(
        &self,
        job: &ClaimedJob,
        update: JobUpdate,
        audit: Vec<AuditRecord>,
    ) -> Result<bool, StoreError> {
        let mut st = self.lock();
        let Some(r) = st.jobs.get_mut(&job.id) else {
            return Ok(false);
        };
        if r.lease_token != job.lease || r.finished_at.is_some() {
            return Ok(false);
        }
        r.lease_until = None;
        r.attempts += 1;
        match update {
            JobUpdate::Done | JobUpdate::Failed { .. } => {
                r.finished_at = Some(Timestamp::now());
            }
            JobUpdate::Retry { at, .. } => r.next_at = at,
        }
        st.append_audit(audit);
        Ok(true)
    }

    async fn next_job_at(&self, quota: &ClaimQuota) -> Result<Option<Timestamp>, StoreError> {
        Ok(self
            .lock()
            .jobs
            .values()
            .filter(|r| r.finished_at.is_none() && quota.limit(&r.job.channel) > 0)
            .map(JobRow::claimable_at)
            .min())
    }

    async fn job_backlog(&self) -> Result<Vec<(String, u64)>, StoreError> {
        let st = self.lock();
        let mut counts: HashMap<String, u64> = HashMap::new();
        for r in st.jobs.values().filter(|r| r.finished_at.is_none()) {
            *counts.entry(r.job.channel.clone()).or_default() += 1;
        }
        let mut v: Vec<_> = counts.into_iter().collect();
        v.sort();
        Ok(v)
    }
}

#[async_trait]
impl AuditStore for MemoryStore {
    async fn append_audit(&self, records: Vec<AuditRecord>) -> Result<(), StoreError> {
        self.lock().append_audit(records);
        Ok(())
    }

    async fn audit(&self, query: &AuditQuery) -> Result<Vec<AuditEntry>, StoreError> {
        let st = self.lock();
        Ok(st.audit.read(query.after_seq, query.since, query.limit))
    }
}

#[async_trait]
impl KvStore for MemoryStore {
    async fn get_value(&self, key: &str) -> Result<Option<String>, StoreError> {
        Ok(self.lock().values.get(key).cloned())
    }

    async fn set_value(&self, key: &str, value: Option<String>) -> Result<(), StoreError> {
        let mut st = self.lock();
        match value {
            Some(v) => st.values.insert(key.to_string(), v),
            None => st.values.remove(key),
        };
        Ok(())
    }

    async fn swap_value(
        &self,
        key: &str,
        expected: Option<&str>,
        value: Option<String>,
    ) -> Result<bool, StoreError> {
        let mut st = self.lock();
        if st.values.get(key).map(String::as_str) != expected {
            return Ok(false);
        }
        match value {
            Some(v) => st.values.insert(key.to_string(), v),
            None => st.values.remove(key),
        };
        Ok(true)
    }

    async fn values_under(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<(String, String)>, StoreError> {
        let st = self.lock();
        let mut found: Vec<(String, String)> = st
            .values
            .iter()
            .filter(|(k, _)| k.starts_with(prefix))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        found.sort();
        found.truncate(limit);
        Ok(found)
    }

    async fn secret(&self, name: &str) -> Result<Vec<u8>, StoreError> {
        Ok(self
            .lock()
            .secrets
            .entry(name.to_string())
            .or_insert_with(random_secret)
            .clone())
    }

    async fn first_sighting(
        &self,
        scope: &str,
        key: &str,
        expires_at: Timestamp,
    ) -> Result<bool, StoreError> {
        let mut st = self.lock();
        let now = Timestamp::now();
        let k = (scope.to_string(), key.to_string());
        match st.seen.get(&k) {
            Some(exp) if *exp > now => Ok(false),
            _ => {
                st.seen.insert(k, expires_at);
                Ok(true)
            }
        }
    }

    async fn forget_sighting(&self, scope: &str, key: &str) -> Result<(), StoreError> {
        self.lock()
            .seen
            .remove(&(scope.to_string(), key.to_string()));
        Ok(())
    }

    async fn check_writable(&self) -> Result<(), StoreError> {
        Ok(())
    }
}

/// Only this process writes it: no change feed, its own events, always the leader.
impl ClusterStore for MemoryStore {}

#[async_trait]
impl GrantStore for MemoryStore {
    async fn add_grant(
        &self,
        grant: crate::interaction::policy::Grant,
        audit: Vec<AuditRecord>,
    ) -> Result<(), StoreError> {
        let mut st = self.lock();
        st.grants.push((grant, None));
        st.append_audit(audit);
        Ok(())
    }

    async fn revoke_grant(
        &self,
        id: &str,
        at: Timestamp,
        audit: Vec<AuditRecord>,
    ) -> Result<Option<crate::interaction::policy::Grant>, StoreError> {
        let mut st = self.lock();
        let Some((grant, revoked)) = st
            .grants
            .iter_mut()
            .find(|(g, revoked)| g.id == id && revoked.is_none() && g.is_live(at))
        else {
            return Ok(None);
        };
        *revoked = Some(at);
        let grant = grant.clone();
        st.append_audit(audit);
        Ok(Some(grant))
    }

    async fn live_grants(
        &self,
        now: Timestamp,
    ) -> Result<Vec<crate::interaction::policy::Grant>, StoreError> {
        Ok(self
            .lock()
            .grants
            .iter()
            .filter(|(g, revoked)| revoked.is_none() && g.is_live(now))
            .map(|(g, _)| g.clone())
            .collect())
    }
}

#[async_trait]
impl SessionStore for MemoryStore {
    async fn change_session(
        &self,
        agent: &str,
        id: &str,
        change: SessionChange,
        audit: Vec<AuditRecord>,
        keep: usize,
    ) -> Result<Option<Session>, StoreError> {
        let mut st = self.lock();
        let key = (agent.to_string(), id.to_string());
        let Some(changed) = change(st.sessions.get(&key).cloned()) else {
            return Ok(None);
        };
        let mut kept = changed.clone();
        kept.delivered_now.clear();
        st.sessions.insert(key, kept);
        st.append_audit(audit);
        if st.sessions.len() > keep {
            let mut by_age: Vec<_> = st
                .sessions
                .iter()
                .map(|(k, s)| (s.last_activity, k.clone()))
                .collect();
            by_age.sort();
            let excess = st.sessions.len() - keep;
            for (_, k) in by_age.into_iter().take(excess) {
                st.sessions.remove(&k);
            }
        }
        Ok(Some(changed))
    }

    async fn session(&self, agent: &str, id: &str) -> Result<Option<Session>, StoreError> {
        let key = (agent.to_string(), id.to_string());
        Ok(self.lock().sessions.get(&key).cloned())
    }

    async fn sessions(&self, limit: usize) -> Result<Vec<Session>, StoreError> {
        let mut all: Vec<Session> = self.lock().sessions.values().cloned().collect();
        all.sort_by(|a, b| b.last_activity.cmp(&a.last_activity).then(a.id.cmp(&b.id)));
        all.truncate(limit);
        Ok(all)
    }
}
