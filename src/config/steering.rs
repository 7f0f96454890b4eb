//! Warnings about the settings of finished turns (docs/steering.md): a wait for a reply that
//! the "finished" question's own deadline cuts short.

use super::Settings;
use crate::interaction::sessions::OnFinish;

/// Each agent whose `on_finish = "ask"` waits longer than a question may wait: the question
/// expires first, and the wait is cut to its deadline.
pub(super) fn warnings(s: &Settings) -> Vec<String> {
    let h = &s.hooks;
    let deadline = s.interactions.question_timeout_secs;
    [
        ("claude_code", h.claude_code.on_finish, h.claude_code.finish_wait_secs),
        ("codex", h.codex.on_finish, h.codex.finish_wait_secs),
        ("acp", h.acp.on_finish, h.acp.finish_wait_secs),
        ("opencode", h.opencode.on_finish, h.opencode.finish_wait_secs),
    ]
    .into_iter()
    .filter(|(_, on_finish, wait)| *on_finish == OnFinish::Ask && *wait > deadline)
    .map(|(agent, _, wait)| {
        format!(
            "hooks.{agent}.finish_wait_secs = {wait} is longer than interactions.question_timeout_secs \
             ({deadline} s): the \"finished\" question expires first, so the wait for a reply ends \
             then. Lower finish_wait_secs to {deadline} or less, or raise question_timeout_secs."
        )
    })
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_past_the_questions_deadline_is_said() {
        let mut s = Settings::defaults().unwrap();
        assert!(warnings(&s).is_empty());
        s.hooks.acp.on_finish = OnFinish::Ask;
        s.hooks.acp.finish_wait_secs = s.interactions.question_timeout_secs + 1;
        let w = warnings(&s);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].starts_with("hooks.acp.finish_wait_secs"), "{w:?}");
        s.hooks.acp.on_finish = OnFinish::Tell;
        assert!(warnings(&s).is_empty());
    }
}
