//! What every chat channel's `/sessions` command (or its platform's equivalent) shares: the
//! agent sessions of the routes that post to one chat, as lines of plain text the channel
//! escapes for its platform ([docs/sessions.md](../../docs/sessions.md)).

use crate::interaction::routes::DEFAULT_ROUTE;
use crate::interaction::{Registry, RegistryError, SessionView};
use crate::present::visible_line;

/// The most sessions one listing shows.
pub const MAX_LISTED: usize = 15;

/// The sessions whose route posts to `address` on `channel` (`listed`: the address is one of
/// the channel's configured places, which the implicit last route posts to), most recently
/// active first, at most [`MAX_LISTED`].
pub async fn of_chat(
    registry: &Registry,
    channel: &str,
    address: &str,
    listed: bool,
) -> Result<Vec<SessionView>, RegistryError> {
    let teams = registry.teams();
    let posts_here = |route: &str| {
        let stamp = if route == DEFAULT_ROUTE || teams.routes.is_empty() {
            return listed;
        } else {
            teams.routes.stamp_named(route)
        };
        stamp.is_some_and(|s| match s.addresses(channel) {
            Some(mut to) => to.any(|t| t == address),
            None => listed,
        })
    };
    let all = registry
        .sessions(None, crate::interaction::MAX_SESSIONS)
        .await?;
    Ok(all
        .into_iter()
        .filter(|s| posts_here(&s.route))
        .take(MAX_LISTED)
        .collect())
}

/// One line per session: its state, agent, directory and when it last did something, with
/// what it said last when it finished. Outside text made visible, not yet escaped for a
/// platform.
pub fn lines(sessions: &[SessionView]) -> Vec<String> {
    sessions
        .iter()
        .map(|s| {
            let mut line = format!(
                "{} · {} · {} · {}",
                s.state.as_str(),
                visible_line(&s.agent),
                visible_line(s.cwd.as_deref().unwrap_or("?")),
                s.last_activity.strftime("%H:%M UTC"),
            );
            if !s.pending.is_empty() {
                line.push_str(&format!(" · {} waiting", s.pending.len()));
            }
            if let Some(m) = s
                .last_message
                .as_deref()
                .filter(|_| s.state.as_str() == "finished")
            {
                let first: String = m.chars().take(100).collect();
                line.push_str(&format!("\n  “{}”", visible_line(&first)));
            }
            line
        })
        .collect()
}
