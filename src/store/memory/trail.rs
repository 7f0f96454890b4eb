//! The in-memory store's audit trail, kept compact: an entry as the chain produces it holds
//! three hashes as 64-character hex strings and five other strings, about 490 bytes, and
//! the store keeps one for every interaction it holds. Here an entry keeps its hashes as
//! their 32 bytes, leaves out its `prev_hash` (the previous entry's hash, as it is whenever
//! the chain is appended to), and shares the interaction's own id string (its texts are
//! one pointer each). An entry that
//! does not fit that form (a hash that is not lowercase hex, a chain that does not follow
//! on) is kept whole. Every entry reads back exactly as it was appended.
//!
//! The short texts that repeat from entry to entry (the actor, the channel, the outcome, a
//! tool's name as the detail) are kept once and shared, and the entries are kept in chunks
//! of a fixed size, so that the trail never holds a doubled, half-empty list (BENCHMARKS.md,
//! memory per pending interaction).

use std::collections::HashSet;

use jiff::Timestamp;

use crate::audit::{Action, AuditEntry, AuditRecord, GENESIS};
use crate::interaction::Text;

/// A hash as bytes, if it is lowercase hex of 32 bytes (as the chain writes every hash).
fn bytes(text: &str) -> Option<[u8; 32]> {
    let mut b = [0u8; 32];
    hex::decode_to_slice(text, &mut b).ok()?;
    (hex::encode(b) == text).then_some(b)
}

/// An entry whose hashes are bytes and whose `prev_hash` is the previous entry's hash.
#[derive(Debug)]
struct Compact {
    seq: i64,
    at: Timestamp,
    action: Action,
    interaction_id: Option<Text>,
    actor: Option<Text>,
    channel: Text,
    outcome: Text,
    input_hash: Option<[u8; 32]>,
    detail: Option<Text>,
    hash: [u8; 32],
}

/// Entries per chunk of the trail.
const CHUNK: usize = 1024;

/// The longest text shared between entries, and how many distinct texts are kept to share:
/// past either, a text is kept for its entry alone.
const WORD_MAX: usize = 64;
const WORDS_MAX: usize = 4096;

/// One entry as kept.
#[derive(Debug)]
enum Kept {
    Compact(Compact),
    Whole(Box<AuditEntry>),
}

impl Kept {
    fn seq(&self) -> i64 {
        match self {
            Kept::Compact(c) => c.seq,
            Kept::Whole(w) => w.seq,
        }
    }

    fn at(&self) -> Timestamp {
        match self {
            Kept::Compact(c) => c.at,
            Kept::Whole(w) => w.record.at,
        }
    }

    fn hash(&self) -> String {
        match self {
            Kept::Compact(c) => hex::encode(c.hash),
            Kept::Whole(w) => w.hash.clone(),
        }
    }
}

/// The trail, oldest first.
#[derive(Debug, Default)]
pub(super) struct Trail {
    /// Chunks of at most [`CHUNK`] entries, each allocated whole.
    chunks: Vec<Vec<Kept>>,
    /// The short texts entries share.
    words: HashSet<Text>,
}

impl Trail {
    fn entries(&self) -> impl Iterator<Item = &Kept> {
        self.chunks.iter().flatten()
    }

    fn last_entry(&self) -> Option<&Kept> {
        self.chunks.last().and_then(|c| c.last())
    }

    /// `text` as kept: the copy other entries share when it is short and the table has room.
    fn word(&mut self, text: String) -> Text {
        if text.len() > WORD_MAX {
            return Text::from(text);
        }
        if let Some(w) = self.words.get(text.as_str()) {
            return w.clone();
        }
        let w: Text = Text::from(text);
        if self.words.len() < WORDS_MAX {
            self.words.insert(w.clone());
        }
        w
    }

    /// The last entry's `seq` and hash.
    pub(super) fn last(&self) -> Option<(i64, String)> {
        self.last_entry().map(|e| (e.seq(), e.hash()))
    }

    /// Keeps `entry`; `id` gives the shared string of an interaction id, if the store holds
    /// that interaction.
    pub(super) fn push(&mut self, entry: AuditEntry, id: impl Fn(&str) -> Option<Text>) {
        let follows = self
            .last_entry()
            .is_some_and(|last| last.hash() == entry.prev_hash);
        let hash = bytes(&entry.hash);
        let input_hash = entry.record.input_hash.as_deref().map(bytes);
        let kept = match (follows, hash, input_hash) {
            (true, Some(hash), None | Some(Some(_))) => {
                let r = entry.record;
                Kept::Compact(Compact {
                    seq: entry.seq,
                    at: r.at,
                    action: r.action,
                    interaction_id: r
                        .interaction_id
                        .map(|i| id(&i).unwrap_or_else(|| Text::from(i))),
                    actor: r.actor.map(|a| self.word(a)),
                    channel: self.word(r.channel),
                    outcome: self.word(r.outcome),
                    input_hash: input_hash.flatten(),
                    detail: r.detail.map(|d| self.word(d)),
                    hash,
                })
            }
            _ => Kept::Whole(Box::new(entry)),
        };
        match self.chunks.last_mut() {
            Some(c) if c.len() < CHUNK => c.push(kept),
            _ => {
                let mut c = Vec::with_capacity(CHUNK);
                c.push(kept);
                self.chunks.push(c);
            }
        }
    }

    /// The entries from `after_seq` on and at or after `since`, oldest first, at most
    /// `limit`, as they were appended.
    pub(super) fn read(
        &self,
        after_seq: i64,
        since: Option<Timestamp>,
        limit: usize,
    ) -> Vec<AuditEntry> {
        let mut out = Vec::new();
        let mut before: Option<&Kept> = None;
        for e in self.entries() {
            let previous = before.replace(e);
            if out.len() >= limit {
                break;
            }
            if e.seq() <= after_seq || since.is_some_and(|t| e.at() < t) {
                continue;
            }
            out.push(match e {
                Kept::Whole(w) => (**w).clone(),
                Kept::Compact(c) => AuditEntry {
                    seq: c.seq,
                    record: AuditRecord {
                        at: c.at,
                        action: c.action,
                        interaction_id: c.interaction_id.as_deref().map(str::to_string),
                        actor: c.actor.as_deref().map(str::to_string),
                        channel: c.channel.to_string(),
                        outcome: c.outcome.to_string(),
                        input_hash: c.input_hash.map(hex::encode),
                        detail: c.detail.as_deref().map(str::to_string),
                    },
                    // A compact entry always follows another.
                    prev_hash: previous.map_or_else(|| GENESIS.to_string(), Kept::hash),
                    hash: hex::encode(c.hash),
                },
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(seq: i64, prev: &str, hash: &str, id: Option<&str>) -> AuditEntry {
        AuditEntry {
            seq,
            record: AuditRecord {
                at: Timestamp::from_second(1_700_000_000 + seq).unwrap(),
                action: Action::Created,
                interaction_id: id.map(str::to_string),
                actor: Some("agent".into()),
                channel: "agent".into(),
                outcome: "pending".into(),
                input_hash: Some("ab".repeat(32)),
                detail: None,
            },
            prev_hash: prev.into(),
            hash: hash.into(),
        }
    }

    #[test]
    fn entries_read_back_exactly_as_appended() {
        let (h1, h2, h3) = ("11".repeat(32), "22".repeat(32), "NOT HEX".to_string());
        let mut odd_input = entry(9, &"33".repeat(32), &"44".repeat(32), None);
        odd_input.record.input_hash = Some("AB".repeat(32));
        let appended = vec![
            // The first continues from a recorded head, not the genesis.
            entry(5, &"ff".repeat(32), &h1, Some("a")),
            entry(6, &h1, &h2, None),
            // Out of the chain's order, and a hash that is not hex: kept as written.
            entry(7, &"0A".repeat(32), &h3, Some("b")),
            entry(8, &h3, &"33".repeat(32), Some("a")),
            odd_input,
            entry(10, &"44".repeat(32), &"55".repeat(32), Some("a")),
        ];
        let shared: Text = Text::from("a");
        let mut trail = Trail::default();
        for e in appended.clone() {
            trail.push(e, |i| (i == "a").then(|| shared.clone()));
        }
        let kept: Vec<_> = trail.entries().collect();
        assert!(matches!(kept[1], Kept::Compact(_)));
        assert!(matches!(kept[5], Kept::Compact(_)));
        assert_eq!(trail.read(0, None, 100), appended);
        assert_eq!(trail.read(6, None, 1), appended[2..3]);
        let since = appended[4].record.at;
        assert_eq!(trail.read(0, Some(since), 100), appended[4..]);
        assert_eq!(trail.last(), Some((10, "55".repeat(32))));
        drop(kept);
        // The interaction's id string is shared, not copied, by the compact entries of
        // "a" (seq 8 and 10; seq 5 is kept whole).
        assert_eq!(Text::strong_count(&shared), Some(3));
    }

    #[test]
    fn entries_span_chunks_and_share_their_repeated_texts() {
        let mut trail = Trail::default();
        let mut prev = "ff".repeat(32);
        let n = CHUNK * 2 + 5;
        for seq in 1..=n as i64 {
            let hash = format!("{seq:064x}");
            trail.push(entry(seq, &prev, &hash, None), |_| None);
            prev = hash;
        }
        assert_eq!(trail.chunks.len(), 3);
        assert!(trail.chunks.iter().all(|c| c.capacity() == CHUNK));
        let read = trail.read(0, None, usize::MAX);
        assert_eq!(read.len(), n);
        assert_eq!(read[CHUNK].seq, CHUNK as i64 + 1);
        assert_eq!(read[CHUNK].prev_hash, format!("{CHUNK:064x}"));
        assert_eq!(trail.last(), Some((n as i64, format!("{n:064x}"))));
        // "agent" (actor and channel) and "pending": one copy each, shared by every entry.
        assert_eq!(trail.words.len(), 2);
        let agent = trail.words.get("agent").unwrap();
        // The first entry does not follow a known head: kept whole, sharing nothing.
        assert_eq!(Text::strong_count(agent), Some(2 * (n - 1) + 1));
    }
}
