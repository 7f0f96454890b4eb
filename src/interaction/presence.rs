//! "Desk first": who is at the desk now. The inbox (shown and focused) and `imrelay watch`
//! report their person every few seconds; a report counts for [`PRESENCE_TTL`], a report of
//! leaving ends it at once. A route with `desk_first_secs` holds the phone copies of a new
//! interaction while one of its approvers is present (the registry stamps the time the phones
//! are told, [`Interaction::phones_at`](super::Interaction::phones_at)).
//!
//! Kept in this process's memory, at most [`MAX_PEOPLE`] people (the longest unseen go
//! first): with several replicas, each knows the presence reported to it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use crate::sync::LockExt;

/// How long a report of presence counts.
pub const PRESENCE_TTL: Duration = Duration::from_secs(30);
/// Most people whose presence is kept.
pub const MAX_PEOPLE: usize = 4096;

/// Who is at the desk (see the module's documentation).
#[derive(Default)]
pub struct Presence {
    // A std mutex: map updates only, never held across an await.
    seen: Mutex<HashMap<String, Instant>>,
}

impl Presence {
    /// `person` is at the desk now (`present`), or left it.
    pub fn report(&self, person: &str, present: bool) {
        let now = Instant::now();
        let mut seen = self.seen.locked();
        if !present {
            seen.remove(person);
            return;
        }
        if !seen.contains_key(person) && seen.len() >= MAX_PEOPLE {
            seen.retain(|_, at| now.duration_since(*at) < PRESENCE_TTL);
            if seen.len() >= MAX_PEOPLE
                && let Some(oldest) = seen
                    .iter()
                    .min_by_key(|(_, at)| **at)
                    .map(|(p, _)| p.clone())
            {
                seen.remove(&oldest);
            }
        }
        seen.insert(person.to_string(), now);
    }

    /// Whether `person` reported presence within [`PRESENCE_TTL`].
    pub fn is_present(&self, person: &str) -> bool {
        self.seen
            .locked()
            .get(person)
            .is_some_and(|at| at.elapsed() < PRESENCE_TTL)
    }

    /// Whether anyone is present.
    pub fn anyone(&self) -> bool {
        self.seen
            .locked()
            .values()
            .any(|at| at.elapsed() < PRESENCE_TTL)
    }

    /// The people present now, sorted.
    pub fn present(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .seen
            .locked()
            .iter()
            .filter(|(_, at)| at.elapsed() < PRESENCE_TTL)
            .map(|(p, _)| p.clone())
            .collect();
        out.sort();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn presence_counts_for_a_while_ends_on_leaving_and_is_bounded() {
        let p = Presence::default();
        assert!(!p.anyone());
        p.report("alice", true);
        assert!(p.is_present("alice") && !p.is_present("bob") && p.anyone());
        tokio::time::advance(PRESENCE_TTL + Duration::from_secs(1)).await;
        assert!(!p.is_present("alice") && !p.anyone());
        p.report("alice", true);
        p.report("alice", false);
        assert!(!p.is_present("alice"));
        for k in 0..MAX_PEOPLE + 10 {
            p.report(&format!("p{k}"), true);
            tokio::time::advance(Duration::from_millis(1)).await;
        }
        assert_eq!(p.seen.locked().len(), MAX_PEOPLE);
        assert!(!p.is_present("p0") && p.is_present(&format!("p{}", MAX_PEOPLE + 9)));
    }
}
