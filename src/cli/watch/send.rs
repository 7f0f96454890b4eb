//! Sending an answer from `imrelay watch`, tried again until imrelay takes it or the
//! deadline passes, and what the watch says of how it went.

use std::time::Duration;

use tokio::sync::mpsc;

use jiff::Timestamp;
use serde_json::Value;

use super::steps::{Grant, Step};
use super::{Current, Watch};
use crate::cli::client::{Backoff, ClientError, Operator, Remote};
use crate::cli::commands::resolved_by_us;
use crate::cli::view::{self, Paint};
use crate::interaction::quorum::Vote;
use crate::interaction::{Answer, Interaction, InteractionId, Outcome};
use crate::present::visible_line;

/// Results of work done beside the loop.
pub(super) enum Done {
    /// Sending an answer ended (with the grant made beside it).
    Sent {
        id: InteractionId,
        result: Result<Interaction, ClientError>,
        grant: Option<Value>,
    },
    /// Sending failed for now and is tried again after `wait`.
    Retrying {
        id: InteractionId,
        attempt: u32,
        error: String,
        wait: Duration,
    },
    /// An interaction was checked after a reconnect.
    Checked {
        id: InteractionId,
        result: Result<Interaction, ClientError>,
    },
    /// `$EDITOR` ended, with the file's text.
    Edited {
        id: InteractionId,
        result: Result<String, String>,
    },
    /// `GET /v1/me` answered: the token's person, if it is labelled.
    Me(Option<Operator>),
}

impl Watch {
    /// Work done beside the loop has ended.
    pub(super) async fn on_done(&mut self, done: Done) {
        match done {
            Done::Checked { id, result } => self.checked(id, result),
            Done::Retrying {
                id,
                attempt,
                error,
                wait,
            } => self.retrying(id, attempt, &error, wait),
            Done::Sent { id, result, grant } => self.sent(id, result, grant),
            Done::Edited { id, result } => self.edited(id, result).await,
            Done::Me(me) => self.learned_me(me),
        }
    }

    /// Sending failed for now: the prompt counts the attempts, the first failure is said.
    fn retrying(&mut self, id: InteractionId, attempt: u32, error: &str, wait: Duration) {
        let Some(Current {
            i,
            step: Step::Sending { attempt: a, .. },
            ..
        }) = &mut self.current
        else {
            return;
        };
        if i.id != id {
            return;
        }
        *a = attempt + 1;
        if attempt == 1 {
            let text = format!(
                "! Could not send the answer ({}). It is kept and sent again (next try in {} s) until imrelay takes it or the deadline passes; q quits and prints it.",
                visible_line(error),
                wait.as_secs_f32().ceil()
            );
            self.say_error(&text);
        }
        self.prompt();
    }

    /// Sending ended: taken (or found answered by us), refused, or given up.
    fn sent(
        &mut self,
        id: InteractionId,
        result: Result<Interaction, ClientError>,
        grant: Option<Value>,
    ) {
        let Some(Current {
            i,
            step: Step::Sending { answer, .. },
            ..
        }) = &self.current
        else {
            return;
        };
        if i.id != id {
            return;
        }
        let (answer, shown) = (answer.clone(), i.clone());
        let won = match result {
            Ok(i) => Ok(i),
            Err(ClientError::AlreadyResolved(i))
                if resolved_by_us(&i, &answer, self.by.as_deref()) =>
            {
                Ok(*i)
            }
            Err(e) => Err(e),
        };
        match won {
            Ok(i) => self.taken(&i, grant.as_ref()),
            Err(ClientError::AlreadyResolved(i)) => self.answered_first(&i),
            Err(ClientError::AlreadyVoted(vote, i)) => self.already_voted(&vote, &i),
            Err(ClientError::NotFound(_) | ClientError::SessionNotFound(_)) => {
                self.say_error("⚑ Not sent: it is gone from imrelay (resolved and pruned).");
            }
            Err(e @ ClientError::Unauthorized { .. }) => {
                self.say_error(&format!("imrelay: {}", visible_line(&e.to_string())));
                return self.quit(e.exit_code());
            }
            Err(e @ (ClientError::Unreachable { .. } | ClientError::Unavailable { .. })) => {
                // Only after the deadline: until then it is tried again.
                self.say_error(&format!(
                    "⚑ Not sent: the deadline passed while imrelay could not take it ({}).",
                    visible_line(&e.to_string())
                ));
            }
            Err(e @ (ClientError::Invalid { .. } | ClientError::Protocol(_))) => {
                return self.not_taken(&e, answer, shown);
            }
        }
        self.forget(&id);
        self.show_next(false);
    }

    /// imrelay took the answer: its outcome, and the grant made beside it.
    fn taken(&mut self, i: &Interaction, grant: Option<&Value>) {
        let p = self.term.painter();
        let mut lines: Vec<String> = view::outcome_line(&p, i, Timestamp::now())
            .into_iter()
            .collect();
        // An approval that needs several people: the answer was a vote, and it waits for more.
        if let Some(votes) = crate::interaction::quorum::tally(i).filter(|_| i.is_pending()) {
            lines.push(p.paint(
                Paint::Green,
                &format!("✓ Vote recorded: {}", visible_line(&votes)),
            ));
            self.voted.insert(i.id.clone());
        }
        lines.extend(view::given_answers(i));
        if let Some(g) = grant.filter(|g| g.is_object()) {
            lines.push(p.paint(
                Paint::Green,
                &format!("Granted: {}", crate::cli::grants::describe(g)),
            ));
            if i.suggestions
                .as_deref()
                .is_some_and(crate::interaction::applied_with_a_grant)
            {
                lines.push(p.paint(
                    Paint::Dim,
                    "The agent also remembers its own suggestion for this session.",
                ));
            }
        }
        self.term.say(&lines);
    }

    /// Someone else answered first, or it had ended: how.
    fn answered_first(&mut self, i: &Interaction) {
        let p = self.term.painter();
        let ended = matches!(
            i.resolution.as_ref().map(|r| r.outcome),
            Some(Outcome::Expired | Outcome::Cancelled)
        );
        let why = if ended {
            "⚑ Not sent: it had already ended."
        } else {
            "⚑ Not sent: someone else answered first."
        };
        let mut lines = vec![p.paint(Paint::Yellow, why)];
        lines.extend(view::outcome_line(&p, i, Timestamp::now()));
        lines.extend(view::given_answers(i));
        self.term.say(&lines);
    }

    /// This person had voted on it already (elsewhere, or before a restart): said as a
    /// person would, and it is not shown again while the others decide.
    fn already_voted(&mut self, vote: &Vote, i: &Interaction) {
        let p = self.term.painter();
        let mut lines = vec![p.paint(
            Paint::Yellow,
            &format!(
                "⚑ Not counted again: you already voted on this ({} by {} via {} at {}), and each person counts once.",
                if vote.allow { "allowed" } else { "denied" },
                visible_line(&vote.by),
                visible_line(vote.via.as_str()),
                view::local_time(vote.at, Timestamp::now())
            ),
        )];
        if let Some(votes) = view::votes_line(i) {
            lines.push(p.paint(Paint::Dim, &format!("It waits for the others: {votes}")));
        }
        // Someone else's name on "your" vote: the terminal without a labelled token.
        if self.operator.is_none()
            && vote.via.as_str() == "terminal"
            && self.by.as_deref() != Some(vote.by.as_str())
        {
            lines.push(p.paint(
                Paint::Dim,
                "(Without a labelled operator token, every answer from a terminal is one person's vote.)",
            ));
        }
        self.term.say(&lines);
        self.voted.insert(i.id.clone());
    }

    /// imrelay refused the answer: said, and back to where it was given.
    fn not_taken(&mut self, e: &ClientError, answer: Answer, shown: Interaction) {
        self.say_error(&format!(
            "imrelay did not take the answer: {}",
            visible_line(&e.to_string())
        ));
        match answer {
            Answer::Allow {
                updated_input: Some(m),
                ..
            } => self.set_step(Step::Edited(m)),
            _ => self.show(shown),
        }
    }

    pub(super) fn forget(&mut self, id: &InteractionId) {
        self.items.retain(|i| &i.id != id);
        self.skipped.remove(id);
    }

    pub(super) fn send(&mut self, answer: Answer) {
        self.send_granting(answer, None);
    }

    /// Sends `answer`, granting `grant` (a rule and `session` or `standing`) with it.
    pub(super) fn send_granting(&mut self, answer: Answer, grant: Option<Grant>) {
        let Some(c) = &self.current else { return };
        let sending = Sending {
            id: c.i.id.clone(),
            deadline: c.i.deadline,
            answer: answer.clone(),
            grant: grant.clone(),
            by: self.by.clone(),
        };
        self.set_step(Step::Sending {
            answer,
            attempt: 1,
            grant,
        });
        tokio::spawn(sending.run(self.remote.clone(), self.done_tx.clone()));
    }
}

/// An answer on its way.
struct Sending {
    id: InteractionId,
    deadline: Timestamp,
    answer: Answer,
    grant: Option<Grant>,
    by: Option<String>,
}

impl Sending {
    /// Sends until imrelay takes it, refuses it, or the deadline passes (and a little after,
    /// for the clocks); each failure for now is told as [`Done::Retrying`], the end as
    /// [`Done::Sent`].
    async fn run(self, remote: Remote, tx: mpsc::UnboundedSender<Done>) {
        let mut backoff = Backoff::default();
        let mut attempt = 1;
        loop {
            let (result, granted) = self.once(&remote).await;
            match result {
                Err(e)
                    if e.is_transient()
                        && Timestamp::now()
                            < self.deadline + jiff::SignedDuration::from_secs(5) =>
                {
                    let wait = backoff.delay();
                    let retry = Done::Retrying {
                        id: self.id.clone(),
                        attempt,
                        error: match &e {
                            ClientError::Unreachable { reason, .. } => reason.clone(),
                            other => other.to_string(),
                        },
                        wait,
                    };
                    if tx.send(retry).is_err() {
                        return;
                    }
                    attempt += 1;
                    tokio::time::sleep(wait).await;
                }
                result => {
                    let _ = tx.send(Done::Sent {
                        id: self.id,
                        result,
                        grant: granted,
                    });
                    return;
                }
            }
        }
    }

    /// One attempt; the grant imrelay made, if one was asked for.
    async fn once(&self, remote: &Remote) -> (Result<Interaction, ClientError>, Option<Value>) {
        let (id, by) = (self.id.as_str(), self.by.as_deref());
        match &self.grant {
            None => (remote.respond(id, &self.answer, by).await, None),
            Some((rule, scope)) => {
                match remote
                    .respond_granting(id, &self.answer, by, Some(rule), scope)
                    .await
                {
                    Ok((i, g)) => (Ok(i), Some(g)),
                    Err(e) => (Err(e), None),
                }
            }
        }
    }
}
