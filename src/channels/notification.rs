//! What a phone notification says of an interaction, the same on every channel that
//! notifies a phone (ntfy, Web Push): the tool and command (or the question's title), the
//! agent and the route; or, in the privacy mode (`include_command = false`), only what kind
//! of thing waits and where ("An approval is waiting in shop").

use crate::channels::words::Words;
use crate::interaction::{Interaction, Kind};
use crate::present::render::{Locale, context_line};

/// Where it comes from, in the fewest words: the route, else the agent, else "imrelay".
pub(crate) fn place(i: &Interaction) -> String {
    i.route
        .as_ref()
        .map(|r| r.name.clone())
        .or_else(|| i.agent.as_deref().map(str::to_string))
        .unwrap_or_else(|| "imrelay".into())
}

/// Whether a phone notification of `i` carries buttons that answer it: an approval's do,
/// unless it needs a passkey (`step_up`), which only the inbox answers (a tap opens its card,
/// and [`text`] says why).
pub(crate) fn answers_here(i: &Interaction) -> bool {
    i.kind == Kind::Approval && !crate::interaction::routes::needs_step_up(i)
}

/// The title and text of a prompt (the text at most `max_chars` long): the command (or the
/// question's title) and its context, or, in the privacy mode, only that something waits;
/// when it needs a passkey, why it is answered in the inbox. In `locale`.
pub(crate) fn text(
    i: &Interaction,
    include_command: bool,
    max_chars: usize,
    locale: Locale,
) -> (String, String) {
    let (title, body) = words(i, include_command, max_chars, Words(locale));
    if i.is_pending() && crate::interaction::routes::needs_step_up(i) {
        let why = crate::present::render::step_up_text(i, locale);
        return (title, join(&body, &why));
    }
    (title, body)
}

/// [`text`] without the passkey's note.
fn words(i: &Interaction, include_command: bool, max_chars: usize, w: Words) -> (String, String) {
    if !include_command {
        return (w.waiting_in(i.kind, &place(i)), w.open_to_see().into());
    }
    let context = context_line(i);
    let body = match i.kind {
        Kind::Approval => {
            let shown = crate::present::present(
                &i.tool_name,
                &i.input.map(),
                i.cwd.as_deref(),
                crate::present::Budget::ALL,
            );
            let text = shown.plain_text();
            let title = format!("{}: {}", i.tool_name, shown.summary);
            return (
                crate::interaction::clip(&title, 200),
                join(&crate::interaction::clip(&text, max_chars), &context),
            );
        }
        _ => i
            .title()
            .or(i.description())
            .unwrap_or(w.open_to_answer())
            .to_string(),
    };
    (
        w.kind_from(i.kind, &place(i)),
        join(&crate::interaction::clip(&body, max_chars), &context),
    )
}

fn join(a: &str, b: &str) -> String {
    if b.is_empty() {
        a.to_string()
    } else {
        format!("{a}\n\n{b}")
    }
}

/// Until when a phone notification of `i` to `person` waits for their quiet hours (`None`:
/// send it now): an escalation's goes through when its route says so
/// (`escalate_to.through_quiet`).
pub(crate) fn held_until(
    people: &crate::interaction::people::People,
    person: &str,
    i: &Interaction,
    escalation: bool,
    now: jiff::Timestamp,
) -> Option<jiff::Timestamp> {
    let through = escalation
        && i.route
            .as_deref()
            .and_then(|r| r.escalation.as_ref())
            .is_some_and(|e| e.through_quiet);
    if through {
        return None;
    }
    let end = people.person(person)?.quiet()?.ends_after(now)?;
    // Past the deadline there is nothing left to send.
    (end < i.deadline).then_some(end).or(Some(i.deadline))
}

/// The outbox's answer for a job held until `end`.
pub(crate) fn hold(end: jiff::Timestamp, now: jiff::Timestamp) -> crate::outbox::Delivery {
    let secs = u64::try_from((end - now).get_seconds().max(1)).unwrap_or(60);
    crate::outbox::Delivery::Retry {
        after: Some(std::time::Duration::from_secs(secs)),
        error: "held for quiet hours".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interaction::InteractionId;
    use crate::interaction::routes::RouteStamp;

    #[test]
    fn a_step_up_approval_offers_no_actions_and_says_the_inbox_answers_it() {
        let mut input = serde_json::Map::new();
        input.insert("command".into(), "make deploy-prod".into());
        let mut i = Interaction::pending(
            InteractionId::parse("n1").unwrap(),
            "Bash",
            input,
            jiff::Timestamp::now(),
            60,
        );
        assert!(answers_here(&i));
        i.route = Some(std::sync::Arc::new(RouteStamp {
            name: "prod".into(),
            step_up: true,
            ..RouteStamp::default_route()
        }));
        assert!(!answers_here(&i));
        for include_command in [true, false] {
            let (_, body) = text(&i, include_command, 500, Locale::EnUs);
            assert!(
                body.ends_with("This needs a passkey (route \"prod\"): open it in the imrelay inbox and answer there"),
                "{body}"
            );
        }
    }
}
