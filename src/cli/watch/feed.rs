//! The event feed reconciled with what `imrelay watch` holds: interactions added in
//! creation order, resolutions told (by whom, through which channel), everything checked
//! again after a reconnect that may have missed events, and only what the filter takes.

use jiff::Timestamp;
use serde_json::Value;

use super::send::Done;
use super::steps::Step;
use super::{Current, Link, Watch};
use crate::cli::client::{ClientError, Feed};
use crate::cli::view::{self, Paint};
use crate::interaction::quorum::{OPERATOR, Vote};
use crate::interaction::routes::DEFAULT_ROUTE;
use crate::interaction::{Interaction, InteractionId, Outcome};
use crate::present::visible_line;

/// Which interactions `imrelay watch` shows; the others are not shown, counted or rung for.
#[derive(clap::Args, Clone, Debug, Default)]
pub(super) struct Filter {
    /// Only interactions of this route (`default`: those no configured route takes).
    #[arg(long, value_name = "NAME")]
    route: Option<String>,
    /// Only this agent's interactions (as the agent names itself).
    #[arg(long, value_name = "AGENT")]
    agent: Option<String>,
    /// Only this agent session's interactions.
    #[arg(long, value_name = "SESSION")]
    session: Option<String>,
}

impl Filter {
    /// Whether `i` is shown.
    pub(super) fn takes(&self, i: &Interaction) -> bool {
        let route = i.route.as_ref().map_or(DEFAULT_ROUTE, |r| r.name.as_str());
        self.route.as_deref().is_none_or(|r| r == route)
            && self
                .agent
                .as_deref()
                .is_none_or(|a| i.agent.as_deref() == Some(a))
            && self
                .session
                .as_deref()
                .is_none_or(|s| i.session.as_deref() == Some(s))
    }

    /// The filter in words (`route deploy, agent codex`); `None` when everything is shown.
    pub(super) fn describe(&self) -> Option<String> {
        let parts: Vec<String> = [
            ("route", &self.route),
            ("agent", &self.agent),
            ("session", &self.session),
        ]
        .into_iter()
        .filter_map(|(what, v)| v.as_deref().map(|v| format!("{what} {}", visible_line(v))))
        .collect();
        (!parts.is_empty()).then(|| parts.join(", "))
    }
}

impl Watch {
    // ----- the event stream -----

    pub(super) fn on_feed(&mut self, feed: Feed) {
        let p = self.term.painter();
        match feed {
            Feed::Connected { resumed } => {
                self.link = Link::Up;
                if self.connected_once {
                    self.term
                        .say1(p.paint(Paint::Green, "✓ Reconnected to imrelay."));
                } else {
                    self.connected_once = true;
                    self.term.say1(p.paint(
                        Paint::Dim,
                        "Connected. Waiting for approvals and questions; q quits.",
                    ));
                }
                if !resumed {
                    self.check_all();
                }
                if !self.knows_me {
                    let (remote, tx) = (self.remote.clone(), self.done_tx.clone());
                    tokio::spawn(async move {
                        if let Ok(me) = remote.me().await {
                            let _ = tx.send(Done::Me(me));
                        }
                    });
                }
                self.prompt();
            }
            Feed::Lost { error, retry_in } => {
                let error = visible_line(&error);
                match self.link {
                    Link::Up => self.say_error(&format!(
                        "! Lost the connection to imrelay ({error}). Reconnecting; answers you give are kept until it is back."
                    )),
                    Link::Connecting => self.say_error(&format!(
                        "! Cannot reach imrelay at {} ({error}); trying again every few seconds.",
                        visible_line(self.remote.url()),
                    )),
                    Link::Down => {}
                }
                let _ = retry_in;
                self.link = Link::Down;
                self.prompt();
            }
            Feed::Created(i) if self.filter.takes(&i) => self.add(i),
            Feed::Resolved(i) if self.filter.takes(&i) => self.resolved(i, false),
            Feed::Voted(i) if self.filter.takes(&i) => self.voted(i),
            Feed::Created(_) | Feed::Resolved(_) | Feed::Voted(_) => {}
            Feed::Reset => {
                self.term.say1(p.paint(
                    Paint::Dim,
                    "imrelay restarted, or events were missed: checking what is still pending.",
                ));
                self.check_all();
            }
            Feed::Unreadable(what) => self.say_error(&format!(
                "! An event could not be read ({}).",
                visible_line(&what)
            )),
            Feed::Refused(e) => {
                self.say_error(&format!("imrelay: {}", visible_line(&e.to_string())));
                self.exit = Some(e.exit_code());
            }
        }
    }

    pub(super) fn add(&mut self, i: Interaction) {
        if !i.is_pending() {
            return self.resolved(i, false);
        }
        // This person's vote is counted: the others decide it now.
        if let Some(v) = self.my_vote(&i).cloned() {
            return self.counted(&i, &v);
        }
        if self.voted.contains(&i.id) {
            return;
        }
        match self.items.iter_mut().find(|o| o.id == i.id) {
            Some(known) => *known = i,
            None => {
                let at = self
                    .items
                    .partition_point(|o| (o.created_at, &o.id) < (i.created_at, &i.id));
                self.items.insert(at, i);
                self.ring();
            }
        }
        if self.current.is_none() {
            self.show_next(false);
        } else {
            self.prompt();
        }
    }

    /// Checks every interaction known, after a reconnect that may have missed events.
    pub(super) fn check_all(&self) {
        for i in &self.items {
            let (remote, tx, id) = (self.remote.clone(), self.done_tx.clone(), i.id.clone());
            tokio::spawn(async move {
                let result = remote.get(id.as_str()).await;
                let _ = tx.send(Done::Checked { id, result });
            });
        }
    }

    /// An interaction checked after a reconnect: still pending, resolved, or gone.
    pub(super) fn checked(&mut self, id: InteractionId, result: Result<Interaction, ClientError>) {
        match result {
            Ok(i) if i.is_pending() => {
                if let Some(known) = self.items.iter_mut().find(|o| o.id == id) {
                    *known = i;
                }
            }
            Ok(i) => self.resolved(i, false),
            Err(ClientError::NotFound(_)) => {
                if let Some(known) = self.items.iter().find(|o| o.id == id).cloned() {
                    self.resolved(known, true);
                }
            }
            // Checked again at the next reconnect.
            Err(_) => {}
        }
    }

    /// A vote on `i` did not decide it: kept with the votes so far, and the running tally
    /// said when it is the one shown (unless the editor has the terminal, or an answer to it
    /// is on its way: the response says the votes then).
    fn voted(&mut self, i: Interaction) {
        let Some(known) = self
            .items
            .iter_mut()
            .find(|o| o.id == i.id && o.created_at == i.created_at)
        else {
            return;
        };
        *known = i.clone();
        let sending = self.current.as_ref().is_some_and(|c| {
            c.i.id == i.id && matches!(c.step, Step::Editing | Step::Sending { .. })
        });
        // This person voted elsewhere (unless it is the answer on its way from here: its
        // response says so).
        if let Some(v) = self.my_vote(&i).cloned().filter(|_| !sending) {
            return self.counted(&i, &v);
        }
        let Some(c) = self.current.as_mut().filter(|c| c.i.id == i.id) else {
            return;
        };
        c.i = i;
        if matches!(c.step, Step::Editing | Step::Sending { .. }) {
            return;
        }
        if let Some(line) = view::votes_line(&c.i) {
            let line = self.term.painter().paint(Paint::Dim, &line);
            self.term.say1(line);
            self.prompt();
        }
    }

    /// This person's vote on `i`, when it is counted already: known with a labelled token,
    /// whose person the server names (`GET /v1/me`).
    fn my_vote<'a>(&self, i: &'a Interaction) -> Option<&'a Vote> {
        let op = self.operator.as_ref()?;
        // A label no person lists is a person of its own.
        let unlisted = format!("{OPERATOR}:{}", op.label);
        i.votes
            .iter()
            .find(|v| v.person == op.name || v.person == unlisted)
    }

    /// `i` waits for the others, this person's vote `v` counted: said once, and not shown
    /// (the next one is, if it was).
    fn counted(&mut self, i: &Interaction, v: &Vote) {
        let shown = self.current.as_ref().is_some_and(|c| c.i.id == i.id);
        self.items.retain(|o| o.id != i.id);
        self.skipped.remove(&i.id);
        let new = self.voted.insert(i.id.clone());
        if !new && !shown {
            return;
        }
        let p = self.term.painter();
        let mut lines = vec![p.paint(
            Paint::Yellow,
            &format!(
                "⚑ You already {} {} ({}) via {}: it waits for the others.",
                if v.allow { "allowed" } else { "denied" },
                i.id,
                visible_line(&i.tool_name),
                visible_line(v.via.as_str()),
            ),
        )];
        lines.extend(view::votes_line(i).map(|l| p.paint(Paint::Dim, &l)));
        self.term.say(&lines);
        if shown {
            self.show_next(false);
        } else {
            self.prompt();
        }
    }

    /// `i` was resolved; `gone` when it no longer exists at all.
    pub(super) fn resolved(&mut self, i: Interaction, gone: bool) {
        self.voted.remove(&i.id);
        let known = self
            .items
            .iter()
            .position(|o| o.id == i.id && (gone || o.created_at == i.created_at));
        let Some(at) = known else {
            // Never pending: a policy rule decided it at creation. Said in passing.
            if let Some(line) = view::policy_line(&self.term.painter(), &i) {
                self.term.say1(line);
                self.prompt();
            }
            return;
        };
        self.items.remove(at);
        self.skipped.remove(&i.id);
        let shown = self
            .current
            .as_ref()
            .is_some_and(|c| c.i.id == i.id && c.i.created_at == i.created_at);
        if !shown {
            self.prompt();
            return;
        }
        if let Some(c) = &mut self.current {
            match c.step {
                // The response to the answer being sent says how it went.
                Step::Sending { .. } => return,
                // Told once the editor closes.
                Step::Editing => {
                    c.meanwhile = Some(i);
                    return;
                }
                _ => {}
            }
        }
        self.tell_resolved(i, gone);
    }

    /// Says how the interaction shown ended (elsewhere), and shows the next.
    pub(super) fn tell_resolved(&mut self, i: Interaction, gone: bool) {
        let p = self.term.painter();
        let mut lines = Vec::new();
        if gone {
            lines.push(p.paint(
                Paint::Yellow,
                "⚑ It is gone from imrelay (resolved and pruned).",
            ));
        } else if let Some(line) = view::outcome_line(&p, &i, Timestamp::now()) {
            lines.push(match i.resolution.as_ref().map(|r| r.outcome) {
                Some(Outcome::Expired | Outcome::Cancelled) => line,
                _ => format!("{} {line}", p.paint(Paint::Yellow, "⚑ Answered elsewhere:")),
            });
            lines.extend(view::given_answers(&i));
        }
        if let Some(Current {
            step: Step::Edited(input),
            ..
        }) = &self.current
        {
            lines.push(p.paint(
                Paint::Yellow,
                &format!(
                    "(Your edited input was not sent: {})",
                    Value::Object(input.clone())
                ),
            ));
        }
        self.term.say(&lines);
        self.show_next(false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interaction::routes::RouteStamp;

    fn interaction(route: Option<&str>, agent: Option<&str>, session: Option<&str>) -> Interaction {
        let id = crate::interaction::InteractionId::generate();
        let mut i = Interaction::pending(id, "Bash", serde_json::Map::new(), Timestamp::now(), 60);
        i.route = route.map(|name| {
            std::sync::Arc::new(RouteStamp {
                name: name.into(),
                ..RouteStamp::default_route()
            })
        });
        i.agent = agent.map(Into::into);
        i.session = session.map(Into::into);
        i
    }

    #[test]
    fn the_filter_takes_only_its_route_agent_and_session() {
        let everything = Filter::default();
        assert!(everything.takes(&interaction(None, None, None)));
        assert_eq!(everything.describe(), None);

        let deploy = Filter {
            route: Some("deploy".into()),
            ..Filter::default()
        };
        assert!(deploy.takes(&interaction(Some("deploy"), None, None)));
        assert!(!deploy.takes(&interaction(Some("ops"), None, None)));
        assert!(!deploy.takes(&interaction(None, None, None)));
        assert_eq!(deploy.describe().as_deref(), Some("route deploy"));

        // Without routes configured, everything takes the implicit last route.
        let default = Filter {
            route: Some(DEFAULT_ROUTE.into()),
            ..Filter::default()
        };
        assert!(default.takes(&interaction(None, None, None)));
        assert!(default.takes(&interaction(Some(DEFAULT_ROUTE), None, None)));
        assert!(!default.takes(&interaction(Some("deploy"), None, None)));

        let codex_s1 = Filter {
            route: None,
            agent: Some("codex".into()),
            session: Some("s1".into()),
        };
        assert!(codex_s1.takes(&interaction(Some("x"), Some("codex"), Some("s1"))));
        assert!(!codex_s1.takes(&interaction(None, Some("codex"), Some("s2"))));
        assert!(!codex_s1.takes(&interaction(None, None, Some("s1"))));
        assert_eq!(
            codex_s1.describe().as_deref(),
            Some("agent codex, session s1")
        );
    }
}
