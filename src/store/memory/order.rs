//! The memory store's listing order: every interaction once, in one ordered set, by its
//! state (pending or resolved), creation time and id. The pending ones form one range of the
//! set and the resolved ones another, so listing either walks only its own; listing both
//! merges the two ranges. (Two sets, one of every interaction and one of the pending ones,
//! held a pending interaction twice; it is held in memory, BENCHMARKS.md.)

use std::cmp::Ordering;
use std::collections::BTreeSet;
use std::iter::Peekable;

use crate::interaction::ports::StatusFilter;
use crate::interaction::{Interaction, InteractionId};

/// A key: the creation time in milliseconds, moved into the pending range when pending, and
/// the id.
type Key = (i64, InteractionId);

/// Where the pending range starts; the resolved range is below it. Creation times are kept
/// within ±2^61 ms (jiff's timestamps span about ±2^48), so the ranges never meet.
const PENDING: i64 = 1 << 62;
const SPAN: i64 = 1 << 61;

fn ms_key(pending: bool, ms: i64) -> i64 {
    let ms = ms.clamp(-SPAN, SPAN - 1);
    if pending { ms + PENDING } else { ms }
}

/// The creation time a key was made from.
fn ms_of(key: i64) -> i64 {
    if key >= SPAN { key - PENDING } else { key }
}

/// Every interaction once, ordered for listing.
#[derive(Default)]
pub(super) struct Order(BTreeSet<Key>);

impl Order {
    /// Adds `i`, in the range of its state.
    pub(super) fn insert(&mut self, i: &Interaction) {
        self.0.insert((
            ms_key(i.is_pending(), i.created_at.as_millisecond()),
            i.id.clone(),
        ));
    }

    /// Moves `i` (pending until now) into the resolved range.
    pub(super) fn resolve(&mut self, i: &Interaction) {
        let ms = i.created_at.as_millisecond();
        if let Some((_, id)) = self.0.take(&(ms_key(true, ms), i.id.clone())) {
            self.0.insert((ms_key(false, ms), id));
        }
    }

    /// Removes `i` (resolved) from the order.
    pub(super) fn remove_resolved(&mut self, i: &Interaction) {
        self.0
            .remove(&(ms_key(false, i.created_at.as_millisecond()), i.id.clone()));
    }

    /// The ids that pass `filter`, newest first, strictly before `(ms, id)` when given.
    pub(super) fn newest_first<'a>(
        &'a self,
        filter: StatusFilter,
        before: Option<(i64, &InteractionId)>,
    ) -> Box<dyn Iterator<Item = &'a InteractionId> + 'a> {
        match filter {
            StatusFilter::Pending => Box::new(self.range(true, before).map(|k| &k.1)),
            StatusFilter::Resolved => Box::new(self.range(false, before).map(|k| &k.1)),
            StatusFilter::All => Box::new(Merge {
                a: self.range(true, before).peekable(),
                b: self.range(false, before).peekable(),
            }),
        }
    }

    /// The keys of one state's range, newest first, before `before`.
    fn range<'a>(
        &'a self,
        pending: bool,
        before: Option<(i64, &InteractionId)>,
    ) -> std::iter::Rev<std::collections::btree_set::Range<'a, Key>> {
        use std::ops::Bound;
        let low = Bound::Included((ms_key(pending, -SPAN), InteractionId::lowest()));
        let high = match before {
            Some((ms, id)) => Bound::Excluded((ms_key(pending, ms), id.clone())),
            // The first key past the range.
            None => Bound::Excluded((ms_key(pending, SPAN - 1) + 1, InteractionId::lowest())),
        };
        self.0.range((low, high)).rev()
    }
}

/// Two newest-first key sequences merged into one, by creation time and id.
struct Merge<I: Iterator> {
    a: Peekable<I>,
    b: Peekable<I>,
}

impl<'a, I: Iterator<Item = &'a Key>> Iterator for Merge<I> {
    type Item = &'a InteractionId;

    fn next(&mut self) -> Option<Self::Item> {
        let pick_a = match (self.a.peek(), self.b.peek()) {
            (Some(a), Some(b)) => (ms_of(a.0), &a.1).cmp(&(ms_of(b.0), &b.1)) != Ordering::Less,
            (Some(_), None) => true,
            (None, _) => false,
        };
        let next = if pick_a { self.a.next() } else { self.b.next() };
        next.map(|k| &k.1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interaction::{Input, Interaction, Resolution, expired};

    fn at(id: &str, ms: i64) -> Interaction {
        Interaction::pending(
            InteractionId::parse(id).unwrap(),
            "Bash",
            Input::default(),
            jiff::Timestamp::from_millisecond(ms).unwrap(),
            60,
        )
    }

    fn resolved(i: &Interaction) -> Interaction {
        let r: Resolution = expired(i, i.created_at);
        i.resolved(r)
    }

    fn ids(o: &Order, f: StatusFilter, before: Option<(i64, &InteractionId)>) -> Vec<String> {
        o.newest_first(f, before)
            .map(|id| id.as_str().to_string())
            .collect()
    }

    #[test]
    fn each_interaction_is_held_once_and_listed_in_its_states_range() {
        let mut o = Order::default();
        let (a, b, c, d) = (at("a", 1), at("b", 2), at("c", 2), at("d", 3));
        for i in [&a, &b, &c, &d] {
            o.insert(i);
        }
        o.resolve(&resolved(&b));
        o.resolve(&resolved(&d));
        assert_eq!(o.0.len(), 4);
        assert_eq!(ids(&o, StatusFilter::Pending, None), ["c", "a"]);
        assert_eq!(ids(&o, StatusFilter::Resolved, None), ["d", "b"]);
        // Both, merged by creation time then id, newest first.
        assert_eq!(ids(&o, StatusFilter::All, None), ["d", "c", "b", "a"]);
        // After a cursor: strictly older (time, id).
        let c_id = c.id.clone();
        assert_eq!(ids(&o, StatusFilter::All, Some((2, &c_id))), ["b", "a"]);
        assert_eq!(ids(&o, StatusFilter::Pending, Some((2, &c_id))), ["a"]);
        // Resolving what is not pending changes nothing; pruning removes the resolved.
        o.resolve(&resolved(&b));
        o.remove_resolved(&resolved(&b));
        assert_eq!(ids(&o, StatusFilter::All, None), ["d", "c", "a"]);
    }

    #[test]
    fn times_at_the_ends_of_the_range_stay_in_their_states_range() {
        let mut o = Order::default();
        let early = at("early", (jiff::Timestamp::MIN.as_second() + 1) * 1000);
        let late = at("late", (jiff::Timestamp::MAX.as_second() - 1) * 1000);
        o.insert(&early);
        o.insert(&resolved(&late));
        assert_eq!(ids(&o, StatusFilter::Pending, None), ["early"]);
        assert_eq!(ids(&o, StatusFilter::Resolved, None), ["late"]);
        assert_eq!(ids(&o, StatusFilter::All, None), ["late", "early"]);
    }
}
