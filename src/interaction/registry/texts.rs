//! The short texts many pending interactions repeat (the tool's name, the agent, its session,
//! its working directory), kept once and shared: the pending interactions of one session point to one
//! copy of each instead of three allocations apiece.
//!
//! Bounded: at most [`MAX_TEXTS`] texts of at most [`MAX_TEXT_BYTES`] bytes are kept. When
//! the set is full, texts no interaction points to any more are let go; when every one is
//! still in use, a new text is simply not shared.

use std::collections::HashSet;
use std::sync::Mutex;

use crate::interaction::Text;
use crate::sync::LockExt;

/// The most texts kept for sharing.
pub(super) const MAX_TEXTS: usize = 4096;

/// The longest text kept for sharing, in bytes; a longer one is held by its interaction alone.
pub(super) const MAX_TEXT_BYTES: usize = 512;

/// The set of shared texts.
#[derive(Default)]
pub(super) struct SharedTexts {
    inner: Mutex<Set>,
}

#[derive(Default)]
struct Set {
    texts: HashSet<Text, foldhash::fast::RandomState>,
    /// Texts added since the set was last swept: a full set of texts all in use is swept
    /// again only after a quarter of its size more, so a sweep's cost is spread thin.
    since_sweep: usize,
}

impl Set {
    fn share(&mut self, text: &str) -> Text {
        if text.len() > MAX_TEXT_BYTES {
            return Text::from(text);
        }
        if let Some(kept) = self.texts.get(text) {
            return kept.clone();
        }
        if self.texts.len() >= MAX_TEXTS {
            if self.since_sweep < MAX_TEXTS / 4 {
                self.since_sweep += 1;
                return Text::from(text);
            }
            // Only the set holds a text whose count is one; nobody else can take a copy of
            // it while the lock is held, so it is safe to let go.
            // A literal (no count) is never let go: it costs nothing.
            self.texts
                .retain(|t| Text::strong_count(t).is_none_or(|n| n > 1));
            self.since_sweep = 0;
            if self.texts.len() >= MAX_TEXTS {
                return Text::from(text);
            }
        }
        let kept = Text::from(text);
        self.texts.insert(kept.clone());
        kept
    }
}

impl SharedTexts {
    /// The one shared copy of `text` (made now if there is none and there is room).
    #[cfg(test)]
    fn share(&self, text: &str) -> Text {
        self.inner.locked().share(text)
    }

    /// The one shared copy of each text given (made now if there is none and there is
    /// room), under one lock: an interaction's agent, session and directory together.
    pub(super) fn share_each<const N: usize>(&self, texts: [Option<&str>; N]) -> [Option<Text>; N] {
        let mut set = self.inner.locked();
        texts.map(|t| t.map(|t| set.share(t)))
    }

    /// How many texts are kept (for tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.inner.locked().texts.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_text_is_one_copy() {
        let texts = SharedTexts::default();
        let a = texts.share("session-1");
        let b = texts.share("session-1");
        assert!(Text::ptr_eq(&a, &b));
        let c = texts.share("session-2");
        assert!(!Text::ptr_eq(&a, &c));
        assert_eq!(texts.len(), 2);
    }

    #[test]
    fn a_long_text_is_not_kept() {
        let texts = SharedTexts::default();
        let long = "x".repeat(MAX_TEXT_BYTES + 1);
        let a = texts.share(&long);
        let b = texts.share(&long);
        assert!(!Text::ptr_eq(&a, &b));
        assert_eq!(texts.len(), 0);
    }

    #[test]
    fn a_full_set_lets_go_of_texts_nobody_holds_and_never_grows_past_its_bound() {
        let texts = SharedTexts::default();
        // Every text still held: the set stops at its bound and new texts are not shared.
        let held: Vec<_> = (0..MAX_TEXTS + 100)
            .map(|n| texts.share(&format!("held-{n}")))
            .collect();
        assert_eq!(texts.len(), MAX_TEXTS);
        let late = texts.share(&format!("held-{}", MAX_TEXTS + 1));
        assert!(!Text::ptr_eq(&late, &held[MAX_TEXTS + 1]));
        // Once nobody holds them, the next sweep (within a quarter of the bound's attempts)
        // lets them go and sharing starts again.
        drop(held);
        drop(late);
        for n in 0..MAX_TEXTS / 4 + 1 {
            drop(texts.share(&format!("fresh-{n}")));
        }
        assert!(texts.len() < MAX_TEXTS / 2, "{} kept", texts.len());
        let a = texts.share("again");
        let b = texts.share("again");
        assert!(Text::ptr_eq(&a, &b));
    }
}
