//! The proxy's part in steering (docs/steering.md): it tells imrelay what each session does
//! (opened, prompted at the desk, its turn ended, with what the agent said last) at
//! [`crate::agents::acp::SESSION_PATH`], and when a turn ends, imrelay's answer is the next
//! prompt, if any: a person's queued messages, a deny's instruction, or a reply to the
//! "finished" question. The proxy sends it to the agent as a `session/prompt` of its own
//! ([`Turns::own_prompt`]); the agent's `session/update` notifications reach the editor as
//! ever, and the answer to the proxy's request stays with the proxy.
//!
//! Each session's reports go in order, and the wait for a reply to a turn's end is abandoned
//! as soon as anything newer happens in the session ([`Reports`]): a person at the desk
//! prompting first wins.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::mpsc;

use super::{Hook, say};
use crate::agents::acp::prompts::{Ended, Turns, Whose};
use crate::agents::acp::session::Tracker;
use crate::agents::turns::{TurnAgent, TurnBody, TurnEvent, TurnReply};
use crate::cli::turns::Reports;

/// A turn's end answered: the session and the prompt to send, or why there is none.
pub(super) type Answered = (String, Result<TurnReply, String>);

/// What the proxy does for steering.
pub(super) struct Steering {
    /// Each session's turns.
    pub turns: Turns,
    hook: Hook,
    /// Each session's reports.
    reports: Reports,
    /// Where the answers to turns' ends arrive.
    answers: mpsc::Sender<Answered>,
    /// Whether a report that failed was said on standard error (once is enough).
    told: Arc<AtomicBool>,
}

impl Steering {
    /// Reports to `hook`'s imrelay; answers to turns' ends go to `answers`.
    pub(super) fn new(hook: Hook, answers: mpsc::Sender<Answered>) -> Self {
        Self {
            turns: Turns::new(),
            hook,
            reports: Reports::default(),
            answers,
            told: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Tells imrelay that `event` happened in `session`; for a turn's end, with what the
    /// agent said, and its answer goes to the proxy's answers.
    pub(super) fn report(
        &mut self,
        tracker: &Tracker,
        event: TurnEvent,
        session: &str,
        said: Option<String>,
    ) {
        let body = TurnBody {
            event,
            session: session.to_string(),
            cwd: tracker.cwd(session),
            agent: tracker.agent().map(|a| TurnAgent {
                name: a.name.clone(),
                title: a.title.clone(),
            }),
            last_message: said,
        };
        let (hook, told, answers) = (self.hook.clone(), self.told.clone(), self.answers.clone());
        let stop = event == TurnEvent::Stopped;
        let key = session.to_string();
        self.reports.send(session, stop, async move {
            let answer = hook.turn(&body).await;
            if let Err(why) = &answer
                && !told.swap(true, Ordering::Relaxed)
            {
                say(&format!(
                    "a session's turn was not reported to imrelay (said once only): {why}"
                ));
            }
            if stop {
                let _ = answers.send((key, answer)).await;
            }
        });
    }

    /// A turn ended: reported when it ended by itself (a cancelled or failed one asks
    /// nothing; what waits for the session waits for its next turn's end).
    pub(super) fn ended(&mut self, tracker: &Tracker, ended: Ended) {
        if ended.finished() {
            self.report(tracker, TurnEvent::Stopped, &ended.session, ended.said);
        } else if ended.stop_reason.is_none() && ended.whose == Whose::Proxy {
            say("the agent answered a prompt sent for a person through imrelay with an error");
        }
    }

    /// Stops every wait for a reply (the agent or the editor is gone): each "finished"
    /// question is withdrawn.
    pub(super) fn abandon_all(&mut self) {
        self.reports.abandon_all();
    }
}
