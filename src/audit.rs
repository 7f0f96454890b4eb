//! The audit trail: an append-only, hash-chained record of every state change and every
//! refused answer attempt.
//!
//! Each entry stores the hash of the previous entry and its own hash over that and its
//! content, so editing or deleting any entry breaks the chain from that point on:
//! [`verify`] walks the chain and names the first broken entry. Entries are appended by the
//! store, in the same transaction as the state change they describe, and each append also
//! records the chain's [`AuditHead`] (its last `seq` and hash): deleting entries from the end
//! leaves no break in the chain, but leaves it ending before the recorded head. A head kept
//! outside the store (printed by `imrelay audit head`) covers a rewrite of the store's head too.

use jiff::Timestamp;
use sha2::{Digest, Sha256};

pub use crate::interaction::ports::audit::{
    Action, AuditEntry, AuditHead, AuditRecord, GENESIS, HEAD_KEY,
};

/// The hash of entry `seq` with content `record`, chained from `prev_hash`.
///
/// The hashed encoding is a fixed sequence of length-prefixed fields (a big-endian u64
/// length, then the bytes; absent optional fields are a single 0 byte, present ones a 1
/// byte then the field), so no two different entries encode alike:
/// `prev_hash, seq (i64 BE), at (unix ms, i64 BE), action, interaction_id?, actor?, channel,
/// outcome, input_hash?, detail?`.
pub(crate) fn entry_hash(prev_hash: &str, seq: i64, record: &AuditRecord) -> String {
    fn field(h: &mut Sha256, bytes: &[u8]) {
        h.update((bytes.len() as u64).to_be_bytes());
        h.update(bytes);
    }
    fn optional(h: &mut Sha256, v: Option<&str>) {
        match v {
            None => h.update([0]),
            Some(s) => {
                h.update([1]);
                field(h, s.as_bytes());
            }
        }
    }
    let mut h = Sha256::new();
    field(&mut h, prev_hash.as_bytes());
    h.update(seq.to_be_bytes());
    h.update(record.at.as_millisecond().to_be_bytes());
    field(&mut h, record.action.as_str().as_bytes());
    optional(&mut h, record.interaction_id.as_deref());
    optional(&mut h, record.actor.as_deref());
    field(&mut h, record.channel.as_bytes());
    field(&mut h, record.outcome.as_bytes());
    optional(&mut h, record.input_hash.as_deref());
    optional(&mut h, record.detail.as_deref());
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

/// Where the next append continues the chain, as `(seq, hash)` of the entry it follows:
/// the recorded `head` when it is at or ahead of the `last` stored entry (entries deleted from
/// the end then stay a visible gap instead of being papered over by the next entry), else the
/// last entry, else the start of the chain.
pub(crate) fn continuation(last: Option<AuditHead>, head: Option<AuditHead>) -> (i64, String) {
    let last = last.map_or_else(|| (0, GENESIS.to_string()), |l| (l.seq, l.hash));
    match head {
        Some(head) if head.seq >= last.0 => (head.seq, head.hash),
        _ => last,
    }
}

/// What appending records to the chain writes: the chained entries and the head to record
/// with them, in the same transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Append {
    /// The new entries, in order.
    pub entries: Vec<AuditEntry>,
    /// The chain's head after them, to store under [`HEAD_KEY`].
    pub head: AuditHead,
}

/// The one rule every backend appends by: `records` chained on from the recorded head
/// `recorded` (the value stored under [`HEAD_KEY`]) or the `last` stored entry, whichever
/// `continuation` picks. An unreadable recorded head is logged (`audit verify` reports it)
/// and appending goes on from the last entry. `None` when there is nothing to append.
pub fn append(
    last: Option<AuditHead>,
    recorded: Option<&str>,
    records: Vec<AuditRecord>,
) -> Option<Append> {
    if records.is_empty() {
        return None;
    }
    let head = match recorded.map(str::parse::<AuditHead>).transpose() {
        Ok(head) => head,
        Err(e) => {
            tracing::error!(error = %e, "the audit chain's recorded head is unreadable");
            None
        }
    };
    let (seq, hash) = continuation(last, head);
    let entries = chain(seq, &hash, records);
    let end = entries.last()?;
    let head = AuditHead {
        seq: end.seq,
        hash: end.hash.clone(),
    };
    Some(Append { entries, head })
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
pub(crate) struct Verifier {
    expected_seq: i64,
    prev_hash: String,
    /// A head kept elsewhere that the chain must contain, and whether it was seen.
    expect: Option<(AuditHead, bool)>,
}

impl Default for Verifier {
    fn default() -> Self {
        Self {
            expected_seq: 1,
            prev_hash: GENESIS.to_string(),
            expect: None,
        }
    }
}

impl Verifier {
    /// A verifier that also requires the chain to contain `head` (one kept outside the store
    /// earlier: the chain may have grown since, but must pass through it).
    pub(crate) fn expecting(head: AuditHead) -> Self {
        Self {
            expect: Some((head, false)),
            ..Self::default()
        }
    }

    /// Checks the next entry.
    pub(crate) fn check(&mut self, e: &AuditEntry) -> Result<(), Broken> {
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
        if let Some((head, seen)) = &mut self.expect
            && head.seq == e.seq
        {
            if head.hash != e.hash {
                return Err(Broken {
                    seq: e.seq,
                    reason: format!(
                        "its hash is not the expected {} (the chain was rewritten)",
                        head.hash
                    ),
                });
            }
            *seen = true;
        }
        self.expected_seq += 1;
        self.prev_hash = e.hash.clone();
        Ok(())
    }

    /// How many entries verified so far.
    pub(crate) fn verified(&self) -> i64 {
        self.expected_seq - 1
    }

    /// The end of the chain verified so far (`None` if it is empty).
    pub(crate) fn end(&self) -> Option<AuditHead> {
        (self.expected_seq > 1).then(|| AuditHead {
            seq: self.expected_seq - 1,
            hash: self.prev_hash.clone(),
        })
    }

    /// Finishes after the last entry: the chain must end exactly at `recorded` (the head the
    /// store recorded with its last append; `None` if it has none) and contain the expected
    /// head, if one was given. Returns how many entries verified.
    pub(crate) fn finish(&self, recorded: Option<&AuditHead>) -> Result<i64, Broken> {
        let end_seq = self.verified();
        if let Some((head, false)) = &self.expect {
            return Err(Broken {
                seq: end_seq + 1,
                reason: format!(
                    "the chain ends at entry {end_seq}, before the expected head {head}: \
                     entries were deleted from the end"
                ),
            });
        }
        match recorded {
            None if end_seq > 0 => Err(Broken {
                seq: end_seq,
                reason: "the store holds no chain head although the chain has entries (it was \
                         deleted)"
                    .into(),
            }),
            None => Ok(0),
            Some(head) if head.seq > end_seq => Err(Broken {
                seq: end_seq + 1,
                reason: format!(
                    "{} missing: the chain ends at entry {end_seq} but its recorded head is \
                     entry {} (deleted from the end)",
                    if head.seq == end_seq + 1 {
                        format!("entry {} is", head.seq)
                    } else {
                        format!("entries {} to {} are", end_seq + 1, head.seq)
                    },
                    head.seq
                ),
            }),
            Some(head) if head.seq < end_seq => Err(Broken {
                seq: head.seq + 1,
                reason: format!(
                    "it lies beyond the recorded head (entry {}): it was appended outside \
                     imrelay, or the head was rolled back",
                    head.seq
                ),
            }),
            Some(head) if head.hash != self.prev_hash => Err(Broken {
                seq: end_seq,
                reason: "its hash does not match the recorded head (the last entry was \
                         replaced)"
                    .into(),
            }),
            Some(_) => Ok(end_seq),
        }
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
    fn entries_are_written_with_millisecond_times() {
        let entry = &chain(0, GENESIS, vec![record(0)])[0];
        let v = serde_json::to_value(entry).unwrap();
        assert_eq!(v["at"], "2023-11-14T22:13:20.000Z");
        let back: AuditEntry = serde_json::from_value(v).unwrap();
        assert_eq!(&back, entry);
    }

    #[test]
    fn an_intact_chain_verifies_and_tampering_is_located() {
        let entries = chain(0, GENESIS, (0..5).map(record).collect());
        assert_eq!(verify(&entries), Ok(5));

        let mut altered = entries.clone();
        altered[2].record.outcome = "denied".into();
        assert_eq!(verify(&altered).unwrap_err().seq, 3);

        // Moving text between fields changes the hash too.
        let mut shifted = entries.clone();
        shifted[0].record.actor = None;
        shifted[0].record.channel = "alicedesktop".into();
        assert_ne!(
            entry_hash(&shifted[0].prev_hash, 1, &shifted[0].record),
            entries[0].hash
        );

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

    #[test]
    fn heads_parse_and_verification_notices_a_shortened_chain() {
        let entries = chain(0, GENESIS, (0..4).map(record).collect());
        let head = AuditHead {
            seq: 4,
            hash: entries[3].hash.clone(),
        };
        assert_eq!(head.to_string().parse::<AuditHead>(), Ok(head.clone()));
        assert!("4".parse::<AuditHead>().is_err());
        assert!("0:abc".parse::<AuditHead>().is_err());

        let walk = |v: &mut Verifier, n: usize| {
            for e in &entries[..n] {
                v.check(e).unwrap();
            }
        };
        let mut v = Verifier::default();
        walk(&mut v, 4);
        assert_eq!(v.finish(Some(&head)), Ok(4));
        assert_eq!(
            v.finish(None).unwrap_err().seq,
            4,
            "a deleted head is noticed"
        );

        // The last entry deleted: the chain is intact but ends before its head.
        let mut v = Verifier::default();
        walk(&mut v, 3);
        let err = v.finish(Some(&head)).unwrap_err();
        assert_eq!(err.seq, 4);
        assert!(err.reason.contains("missing"), "{err}");

        // Every entry deleted.
        assert_eq!(Verifier::default().finish(Some(&head)).unwrap_err().seq, 1);

        // A head kept elsewhere: the chain may grow past it but must pass through it.
        let kept = AuditHead {
            seq: 2,
            hash: entries[1].hash.clone(),
        };
        let mut v = Verifier::expecting(kept.clone());
        walk(&mut v, 4);
        assert_eq!(v.finish(Some(&head)), Ok(4));
        let mut v = Verifier::expecting(head.clone());
        walk(&mut v, 3);
        assert_eq!(
            v.finish(Some(&entries_head(&entries[2]))).unwrap_err().seq,
            4
        );
        // A rewritten chain does not pass through the kept head.
        let rewritten = chain(0, GENESIS, (10..14).map(record).collect());
        let mut v = Verifier::expecting(kept);
        assert_eq!(v.check(&rewritten[0]), Ok(()));
        assert_eq!(v.check(&rewritten[1]).unwrap_err().seq, 2);
    }

    #[test]
    fn appending_continues_from_the_recorded_head_when_it_is_ahead() {
        assert_eq!(append(None, None, Vec::new()), None);
        let first = append(None, None, vec![record(1), record(2)]).unwrap();
        assert_eq!(first.entries[0].prev_hash, GENESIS);
        assert_eq!(first.head, entries_head(&first.entries[1]));
        // The last stored entry was deleted: the next entry follows the recorded head, so the
        // gap stays visible instead of being papered over.
        let last = Some(entries_head(&first.entries[0]));
        let recorded = first.head.to_string();
        let next = append(last.clone(), Some(&recorded), vec![record(3)]).unwrap();
        assert_eq!(
            (next.entries[0].seq, &next.entries[0].prev_hash),
            (3, &first.head.hash)
        );
        // An unreadable recorded head: appending goes on from the last stored entry.
        let next = append(last, Some("garbage"), vec![record(3)]).unwrap();
        assert_eq!(
            (next.entries[0].seq, &next.entries[0].prev_hash),
            (2, &first.entries[0].hash)
        );
        assert_eq!(next.head, entries_head(&next.entries[0]));
    }

    fn entries_head(e: &AuditEntry) -> AuditHead {
        AuditHead {
            seq: e.seq,
            hash: e.hash.clone(),
        }
    }
}
