//! The records of the audit trail as the core emits them and the stores keep them: what
//! happened ([`AuditRecord`]), a chained entry ([`AuditEntry`]) and the chain's end
//! ([`AuditHead`]). Chaining and verifying them is `crate::audit`'s work.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// The hash the first entry chains from.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The key of the small named value that holds the chain's head.
pub const HEAD_KEY: &str = "audit.head";

/// The end of the chain: the last entry's `seq` and hash, written `SEQ:HASH`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditHead {
    /// The last entry's position.
    pub seq: i64,
    /// The last entry's hash.
    pub hash: String,
}

impl std::fmt::Display for AuditHead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.seq, self.hash)
    }
}

impl std::str::FromStr for AuditHead {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || format!("{s:?} is not an audit head (SEQ:HASH, e.g. 42:5b1e...)");
        let (seq, hash) = s.trim().split_once(':').ok_or_else(bad)?;
        let seq: i64 = seq.parse().map_err(|_| bad())?;
        if seq < 1 || hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad());
        }
        Ok(Self {
            seq,
            hash: hash.to_ascii_lowercase(),
        })
    }
}

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
    /// A policy rule decided (or, in shadow mode, would have decided) an interaction: the
    /// actor is the rule, the outcome `allow`, `deny`, `ask` or, for a shadow rule,
    /// `would_allow`, `would_deny`, `would_ask`; the detail the pattern that matched.
    Policy,
    /// A person granted a standing or session rule ("allow this and similar calls").
    Granted,
    /// A person voted on an approval that needs several people (the outcome `allow` or
    /// `deny`; the detail the votes so far). The vote that decides is recorded as
    /// [`Action::Answered`] besides.
    Voted,
    /// A grant was revoked. (A session grant that runs out is not recorded as an event.)
    Revoked,
    /// Nobody answered in time: the route's escalation posted it to more places.
    Escalated,
    /// A person sent a message to an agent session (the detail: the session and the text's
    /// first characters), or it was handed to the agent (the outcome `delivered`).
    Steered,
    /// A person's passkey was registered (`registered`), verified for an answer that needs
    /// one (`asserted`), refused (`refused`) or removed (`removed`); the detail names the
    /// credential (its label and the start of its id). An enrolment code for a person's first
    /// passkey was issued (`code_issued`), used (`code_used`) or refused (`code_refused`).
    Passkey,
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
            Action::Policy => "policy",
            Action::Granted => "granted",
            Action::Revoked => "revoked",
            Action::Voted => "voted",
            Action::Escalated => "escalated",
            Action::Steered => "steered",
            Action::Passkey => "passkey",
        }
    }
}

/// One audited event, before it is chained.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditRecord {
    /// When it happened.
    #[serde(serialize_with = "crate::interaction::millis")]
    pub at: Timestamp,
    /// What happened.
    pub action: Action,
    /// The interaction concerned, if any.
    pub interaction_id: Option<String>,
    /// Who acted (a person, an agent label, `system` for imrelay itself); none for an
    /// anonymous answer.
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
