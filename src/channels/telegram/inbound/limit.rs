//! The rate limit on the bot's answers to people who are not approvers, so strangers cannot
//! fill the send queue that prompts use.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::sync::LockExt;

/// Shortest gap between two answers to non-approvers in one chat.
const PER_CHAT_COOLDOWN: Duration = Duration::from_secs(10);
/// Most answers to non-approvers in [`WINDOW`], over all chats.
const PER_WINDOW: u32 = 20;
/// The window of [`PER_WINDOW`].
const WINDOW: Duration = Duration::from_secs(60);

/// Limits the bot's answers to people who are not approvers (`/whoami` from strangers, say):
/// at most one per chat every [`PER_CHAT_COOLDOWN`], and [`PER_WINDOW`] per [`WINDOW`] in
/// all. Answers to approvers are never limited.
#[derive(Debug)]
pub(in crate::channels::telegram) struct ReplyLimit {
    // A std mutex: a few map operations, never held across an await.
    state: Mutex<LimitState>,
}

#[derive(Debug)]
struct LimitState {
    /// When each chat last got an answer (only chats answered in the current window or
    /// within the cooldown are kept).
    last: HashMap<i64, Instant>,
    window_start: Instant,
    used: u32,
}

impl ReplyLimit {
    pub(in crate::channels::telegram) fn new() -> Self {
        Self {
            state: Mutex::new(LimitState {
                last: HashMap::new(),
                window_start: Instant::now(),
                used: 0,
            }),
        }
    }

    /// Whether a non-approver in `chat` may get an answer at `now`; counts it if so.
    pub(super) fn allow(&self, chat: i64, now: Instant) -> bool {
        let mut st = self.state.locked();
        if now.saturating_duration_since(st.window_start) >= WINDOW {
            st.window_start = now;
            st.used = 0;
            st.last
                .retain(|_, t| now.saturating_duration_since(*t) < PER_CHAT_COOLDOWN);
        }
        if st.used >= PER_WINDOW
            || st
                .last
                .get(&chat)
                .is_some_and(|t| now.saturating_duration_since(*t) < PER_CHAT_COOLDOWN)
        {
            return false;
        }
        st.last.insert(chat, now);
        st.used += 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_to_strangers_are_limited_per_chat_and_overall() {
        let limit = ReplyLimit::new();
        let t0 = Instant::now(); // after the window opened
        assert!(limit.allow(1, t0));
        assert!(
            !limit.allow(1, t0 + Duration::from_secs(9)),
            "within the cooldown"
        );
        assert!(limit.allow(2, t0), "another chat has its own cooldown");
        assert!(limit.allow(1, t0 + PER_CHAT_COOLDOWN));
        // Overall: at most PER_WINDOW answers per window, whatever the chats.
        let limit = ReplyLimit::new();
        let t0 = Instant::now();
        let n = (0..100).filter(|c| limit.allow(*c, t0)).count();
        assert_eq!(n, PER_WINDOW as usize);
        assert!(!limit.allow(1000, t0 + Duration::from_secs(59)));
        assert!(limit.allow(1000, t0 + WINDOW));
        // Chats past their cooldown are forgotten at the window's turn.
        assert!(limit.state.lock().unwrap().last.len() <= 1);
    }
}
