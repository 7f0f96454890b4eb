//! The audit trail: an append-only, hash-chained record of every state change and every
//! refused answer attempt.
//!
//! Each entry stores the hash of the previous entry and its own hash over that and its
//! content, so editing or deleting any entry breaks the chain from that point on:
//! [`verify`] walks the chain and names the first broken entry. Entries are appended by the
//! store, in the same transaction as the state change they describe.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The hash the first entry chains from.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// What happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// An agent created an interaction.
    Created,
    /// A person answered (allowed, denied, answered a question).
    Answered,
    /// An answer attempt was refused (non-approver, bad signature, already resolved, ...).
    Refused,
    /// The deadline passed.
    Expired,
    /// The agent withdrew it, or imrelay gave it up.
    Cancelled,
    /// An outbox delivery was given up.
    DeliveryFailed,
}

impl Action {
    /// The snake_case label.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Created => "created",
            Action::Answered => "answered",
            Action::Refused => "refused",
            Action::Expired => "expired",
            Action::Cancelled => "cancelled",
            Action::DeliveryFailed => "delivery_failed",
        }
    }
}

/// One audited event, before it is chained.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditRecord {
    /// When it happened.
    pub at: Timestamp,
    /// What happened.
    pub action: Action,
    /// The interaction concerned, if any.
    pub interaction_id: Option<String>,
    /// Who acted (a person, an agent label, `system`).
    pub actor: Option<String>,
    /// Through which channel (`desktop`, `api`, `telegram`, `webhook:<name>`, `system`, ...).
    pub channel: String,
    /// The outcome (`allowed`, `denied`, `refused`, ...).
    pub outcome: String,
    /// SHA-256 of the interaction's tool name and input as shown to people.
    pub input_hash: Option<String>,
    /// Free text: a refusal's reason, a failed delivery's error.
    pub detail: Option<String>,
}

/// A chained entry as stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditEntry {
    /// Position in the chain, from 1, without gaps.
    pub seq: i64,
    /// The event.
    #[serde(flatten)]
    pub record: AuditRecord,
    /// The previous entry's hash ([`GENESIS`] for the first).
    pub prev_hash: String,
    /// This entry's hash.
    pub hash: String,
}

/// The hash of entry `seq` with content `record`, chained from `prev_hash`.
pub fn entry_hash(prev_hash: &str, seq: i64, record: &AuditRecord) -> String {
    let mut h = Sha256::new();
    h.update(prev_hash.as_bytes());
    h.update(b"\n");
    h.update(seq.to_string().as_bytes());
    h.update(b"\n");
    // Struct fields serialize in declaration order, so this encoding is stable.
    h.update(serde_json::to_vec(record).unwrap_or_default());
    hex::encode(h.finalize())
}

/// Chains `records` after the entry (`last_seq`, `last_hash`).
pub fn chain(last_seq: i64, last_hash: &str, records: Vec<AuditRecord>) -> Vec<AuditEntry> {
    let mut prev = last_hash.to_string();
    let mut seq = last_seq;
    records
        .into_iter()
        .map(|mut record| {
            // Times are stored with millisecond precision; hash what is stored.
            record.at =
                Timestamp::from_millisecond(record.at.as_millisecond()).unwrap_or(record.at);
            seq += 1;
            let hash = entry_hash(&prev, seq, &record);
            AuditEntry {
                seq,
                record,
                prev_hash: std::mem::replace(&mut prev, hash.clone()),
                hash,
            }
        })
        .collect()
}

/// Where and how the chain is broken.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("audit chain broken at entry {seq}: {reason}")]
pub struct Broken {
    /// The first entry that does not verify.
    pub seq: i64,
    /// What is wrong with it.
    pub reason: String,
}

/// Incremental verification of a chain read in order.
#[derive(Debug)]
pub struct Verifier {
    expected_seq: i64,
    prev_hash: String,
}

impl Default for Verifier {
    fn default() -> Self {
        Self {
            expected_seq: 1,
            prev_hash: GENESIS.to_string(),
        }
    }
}

impl Verifier {
    /// Checks the next entry.
    pub fn check(&mut self, e: &AuditEntry) -> Result<(), Broken> {
        if e.seq != self.expected_seq {
            return Err(Broken {
                seq: self.expected_seq,
                reason: format!(
                    "entry {} is missing (the next entry found is {})",
                    self.expected_seq, e.seq
                ),
            });
        }
        if e.prev_hash != self.prev_hash {
            return Err(Broken {
                seq: e.seq,
                reason: "its previous-hash does not match the entry before it".into(),
            });
        }
        if entry_hash(&e.prev_hash, e.seq, &e.record) != e.hash {
            return Err(Broken {
                seq: e.seq,
                reason: "its content does not match its hash (altered)".into(),
            });
        }
        self.expected_seq += 1;
        self.prev_hash = e.hash.clone();
        Ok(())
    }

    /// How many entries verified so far.
    pub fn verified(&self) -> i64 {
        self.expected_seq - 1
    }
}

/// Verifies a whole chain; returns how many entries it holds.
pub fn verify<'a>(entries: impl IntoIterator<Item = &'a AuditEntry>) -> Result<i64, Broken> {
    let mut v = Verifier::default();
    for e in entries {
        v.check(e)?;
    }
    Ok(v.verified())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(n: u32) -> AuditRecord {
        AuditRecord {
            at: Timestamp::from_second(1_700_000_000 + n as i64).unwrap(),
            action: Action::Answered,
            interaction_id: Some(format!("i{n}")),
            actor: Some("alice".into()),
            channel: "desktop".into(),
            outcome: "allowed".into(),
            input_hash: None,
            detail: None,
        }
    }

    #[test]
    fn an_intact_chain_verifies_and_tampering_is_located() {
        let entries = chain(0, GENESIS, (0..5).map(record).collect());
        assert_eq!(verify(&entries), Ok(5));

        let mut altered = entries.clone();
        altered[2].record.outcome = "denied".into();
        assert_eq!(verify(&altered).unwrap_err().seq, 3);

        let mut deleted = entries.clone();
        deleted.remove(1);
        let err = verify(&deleted).unwrap_err();
        assert_eq!(err.seq, 2);
        assert!(err.reason.contains("missing"));

        // Rewriting an entry's hash to match its new content still breaks the next link.
        let mut rehashed = entries.clone();
        rehashed[1].record.actor = Some("mallory".into());
        rehashed[1].hash = entry_hash(&rehashed[1].prev_hash, 2, &rehashed[1].record);
        assert_eq!(verify(&rehashed).unwrap_err().seq, 3);

        let more = chain(5, &entries[4].hash, vec![record(9)]);
        let all: Vec<_> = entries.iter().chain(more.iter()).cloned().collect();
        assert_eq!(verify(&all), Ok(6));
    }
}
