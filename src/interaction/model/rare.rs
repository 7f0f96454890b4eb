//! The fields of an interaction that few interactions set (a title and description, labels,
//! a quorum and its votes, the escalation time), kept behind one pointer that is null when
//! none is set: pending interactions are held in memory, and the inline space of these
//! fields would otherwise be paid by every one of them (BENCHMARKS.md, "memory per pending
//! interaction").

use std::fmt;

use jiff::Timestamp;

use super::stamps::{Quorum, Vote};

/// The rarely set fields of an [`Interaction`](super::Interaction), read through its
/// accessors ([`title`](super::Interaction::title), [`votes`](super::Interaction::votes), …).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Rare {
    /// Human-readable title from the SDK's context.
    pub title: Option<Box<str>>,
    /// Human-readable description from the SDK's context.
    pub description: Option<Box<str>>,
    /// Labels the agent sent (`prod`, `project:shop`): routes match on them.
    pub labels: Vec<Box<str>>,
    /// How many different people decide it.
    pub quorum: Option<Quorum>,
    /// The votes recorded so far, in their order.
    pub votes: Vec<Vote>,
    /// When its route's escalation posted it to more places.
    pub escalated_at: Option<Timestamp>,
    /// "Desk first": when the phones are told.
    pub phones_at: Option<Timestamp>,
}

/// The empty set of rare fields, what a null pointer stands for.
static NONE: Rare = Rare {
    title: None,
    description: None,
    labels: Vec::new(),
    quorum: None,
    votes: Vec::new(),
    escalated_at: None,
    phones_at: None,
};

/// [`Rare`] behind one pointer, null while every field is unset. Two values compare equal
/// when their fields do, whether or not a box was allocated for the empty set.
#[derive(Clone, Default)]
pub struct RareBox(Option<Box<Rare>>);

impl RareBox {
    /// The fields (the empty set when none was set).
    pub fn get(&self) -> &Rare {
        self.0.as_deref().unwrap_or(&NONE)
    }

    /// The fields to change, allocated on first use.
    pub fn get_mut(&mut self) -> &mut Rare {
        self.0.get_or_insert_with(Box::default)
    }

    /// Whether a box is allocated (for tests of the memory held).
    pub fn is_allocated(&self) -> bool {
        self.0.is_some()
    }

    /// Applies `change` unless `unset` (the value to set is empty) and nothing is allocated:
    /// setting an empty value never allocates.
    pub(super) fn set(&mut self, unset: bool, change: impl FnOnce(&mut Rare)) {
        if unset && self.0.is_none() {
            return;
        }
        change(self.get_mut());
        if self.0.as_deref() == Some(&NONE) {
            self.0 = None;
        }
    }
}

impl From<Rare> for RareBox {
    fn from(rare: Rare) -> Self {
        if rare == NONE {
            Self(None)
        } else {
            Self(Some(Box::new(rare)))
        }
    }
}

impl PartialEq for RareBox {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

impl fmt::Debug for RareBox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.get(), f)
    }
}
