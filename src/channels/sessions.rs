//! What every chat channel's `/sessions` command (or its platform's equivalent) shares: the
//! agent sessions of the routes that post to one chat, as lines of plain text the channel
//! escapes for its platform ([docs/sessions.md](../../docs/sessions.md)).

use crate::interaction::routes::{Admission, DEFAULT_ROUTE, route_admission};
use crate::interaction::{Registry, RegistryError, SessionView};
use crate::present::render::Locale;
use crate::present::visible_line;

/// The most sessions one listing shows.
pub(crate) const MAX_LISTED: usize = 15;

/// The sessions whose route posts to `address` on `channel` (`listed`: the address is one of
/// the channel's configured places, which the implicit last route posts to), most recently
/// active first, at most [`MAX_LISTED`].
pub(crate) async fn of_chat(
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
pub(crate) fn lines(sessions: &[SessionView]) -> Vec<String> {
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

/// Whether `id` on `channel` may list the sessions: on the channel's approver list
/// (`listed`), or an approver of a configured route.
pub(crate) fn may_list(registry: &Registry, channel: &str, id: &str, listed: bool) -> bool {
    if listed {
        return true;
    }
    let teams = registry.teams();
    teams.routes.routes().iter().any(|r| {
        !r.spec().approvers.is_empty()
            && route_admission(Some(&r.stamp()), &teams.people, channel, id, false)
                == Admission::Admitted
    })
}

/// Whether `text` (a chat message, mentions stripped) is the `/sessions` command: `/sessions`
/// or `sessions`, any case, or `会话`.
pub(crate) fn is_command(text: &str) -> bool {
    let word = text.trim().trim_start_matches('/');
    let word = word.split('@').next().unwrap_or(word);
    word.eq_ignore_ascii_case("sessions") || word == "会话"
}

/// What the `/sessions` command answers on a chat channel, in plain text (the channel
/// escapes it for its platform), in `locale`: the listing for `who` (an `id` on `channel`,
/// `listed` on its approver list) in the chat `address` (`configured`: one of the
/// channel's configured places). Written once for every channel but Telegram, whose HTML
/// answer draws the same words.
pub(crate) async fn answer(
    registry: &Registry,
    channel: &str,
    address: &str,
    configured: bool,
    (id, listed): (&str, bool),
    locale: Locale,
) -> String {
    let w = crate::channels::words::Words(locale);
    if !may_list(registry, channel, id, listed) {
        tracing::info!(channel, "/sessions from someone who approves nothing here");
        return w.only_approvers_list().into();
    }
    let sessions = match of_chat(registry, channel, address, configured).await {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(channel, error = %e, "cannot list the sessions");
            return w.sessions_unreadable().into();
        }
    };
    if sessions.is_empty() {
        return w.no_sessions().into();
    }
    format!("{}\n{}", w.sessions(), lines(&sessions).join("\n"))
}
