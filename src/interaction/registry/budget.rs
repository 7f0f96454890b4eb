//! The bytes pending interactions may hold in this process's memory: in all, and for each
//! owner (an agent token, named by whoever creates the interaction). A new interaction that
//! would pass either bound is refused before anything is written ([`Full`]); what the
//! process holds anyway (loaded at start-up, made by another replica) is counted without
//! refusal. The bytes are released when the interaction's slot is dropped, that is once it
//! is resolved and its last waiter has gone.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::Interaction;
use crate::interaction::Text;
use crate::sync::LockExt;

/// What an interaction costs besides its text: the slot, the deadline entry, the maps.
const OVERHEAD_BYTES: usize = 512;

/// The bytes an interaction holds while pending, about.
pub(super) fn cost(i: &Interaction) -> usize {
    // Shared texts are counted in full: the budget is a bound, not a measurement.
    let shown = |s: Option<&str>| s.map_or(0, str::len);
    let text = |s: &Option<crate::interaction::Text>| shown(s.as_deref());
    OVERHEAD_BYTES
        + i.input.as_json().len()
        + i.tool_name.len()
        + text(&i.session)
        + text(&i.agent)
        + shown(i.title())
        + shown(i.description())
        + text(&i.cwd)
        + i.suggestions.as_deref().map_or(0, |s| s.to_string().len())
}

/// A new interaction that would pass a bound.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Full {
    /// The owner already holds its share.
    #[error(
        "the pending interactions of this agent token already hold {held} bytes of at most \
         {max} (interactions.max_pending_bytes_per_token): answer or cancel some first"
    )]
    Owner {
        /// What the owner holds.
        held: usize,
        /// Its share.
        max: usize,
    },
    /// The process holds all it may.
    #[error(
        "pending interactions already hold {held} bytes of at most {max} \
         (interactions.max_pending_bytes): answer or cancel some first"
    )]
    Total {
        /// What is held in all.
        held: usize,
        /// The bound.
        max: usize,
    },
}

/// The bounds and what is held.
#[derive(Debug)]
pub(crate) struct Budget {
    max_total: usize,
    max_per_owner: usize,
    held: Mutex<Held>,
}

#[derive(Debug, Default)]
struct Held {
    total: usize,
    /// Each owner's name is one string, shared by its charges and its interactions.
    by_owner: HashMap<Text, usize>,
}

/// Bytes counted against the budget until dropped.
#[derive(Debug)]
pub(crate) struct Charge {
    budget: Arc<Budget>,
    owner: Option<Text>,
    bytes: usize,
}

impl Budget {
    /// A budget of `max_total` bytes in all and `max_per_owner` for each owner.
    pub(crate) fn new(max_total: usize, max_per_owner: usize) -> Arc<Self> {
        Arc::new(Self {
            max_total,
            max_per_owner,
            held: Mutex::new(Held::default()),
        })
    }

    /// `name` as one shared string: the one the budget holds for that owner if it holds any
    /// of its bytes (every pending interaction of an agent token then points to one copy of
    /// its name), or a new one.
    pub(crate) fn owner(&self, name: &str) -> Text {
        match self.held.locked().by_owner.get_key_value(name) {
            Some((shared, _)) => shared.clone(),
            None => Text::from(name),
        }
    }

    /// Counts `bytes` for `owner`, unless that passes a bound.
    pub(crate) fn reserve(
        self: &Arc<Self>,
        owner: Option<&Text>,
        bytes: usize,
    ) -> Result<Charge, Full> {
        let mut held = self.held.locked();
        if let Some(owner) = owner {
            let mine = held.by_owner.get(&**owner).copied().unwrap_or(0);
            if mine.saturating_add(bytes) > self.max_per_owner {
                return Err(Full::Owner {
                    held: mine,
                    max: self.max_per_owner,
                });
            }
        }
        if held.total.saturating_add(bytes) > self.max_total {
            return Err(Full::Total {
                held: held.total,
                max: self.max_total,
            });
        }
        Ok(self.add(&mut held, owner, bytes))
    }

    /// Counts `bytes` held anyway (an interaction loaded or adopted), without a bound.
    pub(crate) fn force(self: &Arc<Self>, bytes: usize) -> Charge {
        let mut held = self.held.locked();
        self.add(&mut held, None, bytes)
    }

    fn add(self: &Arc<Self>, held: &mut Held, owner: Option<&Text>, bytes: usize) -> Charge {
        held.total = held.total.saturating_add(bytes);
        if let Some(owner) = owner {
            *held.by_owner.entry(owner.clone()).or_insert(0) += bytes;
        }
        Charge {
            budget: self.clone(),
            owner: owner.cloned(),
            bytes,
        }
    }

    /// The bytes held in all.
    pub(crate) fn held(&self) -> usize {
        self.held.locked().total
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        let mut held = self.budget.held.locked();
        held.total = held.total.saturating_sub(self.bytes);
        if let Some(owner) = &self.owner
            && let Some(mine) = held.by_owner.get_mut(&**owner)
        {
            *mine = mine.saturating_sub(self.bytes);
            if *mine == 0 {
                held.by_owner.remove(&**owner);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_bound_refuses_and_dropping_releases() {
        let b = Budget::new(1000, 600);
        let a1 = b.reserve(Some(&"a".into()), 500).expect("fits");
        assert_eq!(
            b.reserve(Some(&"a".into()), 200).unwrap_err(),
            Full::Owner {
                held: 500,
                max: 600
            }
        );
        let b1 = b.reserve(Some(&"b".into()), 400).expect("fits");
        assert_eq!(
            b.reserve(Some(&"c".into()), 200).unwrap_err(),
            Full::Total {
                held: 900,
                max: 1000
            }
        );
        // Held anyway: counted, never refused.
        let forced = b.force(5000);
        assert_eq!(b.held(), 5900);
        drop((a1, forced));
        assert_eq!(b.held(), 400);
        let a2 = b.reserve(Some(&"a".into()), 600).expect("released");
        drop((a2, b1));
        assert_eq!(b.held(), 0);
        assert!(b.held.locked().by_owner.is_empty());
    }
}
