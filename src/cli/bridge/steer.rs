//! The bridge's part in steering (docs/steering.md): OpenCode's event stream says when a
//! session starts working (`session.status` busy) and when its turn ends (`session.idle`);
//! the bridge reports both to imrelay at [`SESSION_PATH`], the end with what the model said
//! last (`GET /session/{id}/message`), and imrelay's answer to an end (a person's queued
//! messages, or a reply to the "finished" question) goes back to the session as its next
//! message, through OpenCode's own `POST /session/{id}/prompt_async`: OpenCode's interface
//! shows it as the person's message, and the turn it starts.
//!
//! A deny's instruction needs nothing here: OpenCode hands a reject's `message` to the model
//! as the tool's result and goes on with the turn.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use super::Bridge;
use crate::agents::opencode::{SESSION_PATH, segment};
use crate::agents::turns::{TurnBody, TurnEvent, TurnReply};
use crate::cli::turns::Reports;
use crate::sync::LockExt;
use crate::telemetry::escape;

/// Sessions remembered as busy, per server (past it, the memory starts over: a turn may
/// then be reported as begun twice, which changes nothing).
const MAX_BUSY: usize = 1024;

/// The longest imrelay may hold the report of a turn's end (it waits for a reply for at most
/// `finish_wait_secs`, and the question's own deadline).
const TURN_WAIT: Duration = Duration::from_secs(24 * 3600);

/// How many of a session's last messages are read for what the model said last.
const LAST_MESSAGES: usize = 4;

/// What the bridge to one server follows of its sessions' turns.
#[derive(Default)]
pub(super) struct Steering {
    busy: HashSet<String>,
    reports: Reports,
}

impl Bridge {
    /// `session` is working: the first `busy` of a turn is reported.
    pub(super) fn busy(self: &Arc<Self>, session: String) {
        let mut steering = self.steering.locked();
        if steering.busy.len() >= MAX_BUSY {
            steering.busy.clear();
        }
        if !steering.busy.insert(session.clone()) {
            return;
        }
        let (me, s) = (self.clone(), session.clone());
        steering.reports.send(&session, false, async move {
            me.report(TurnEvent::Prompted, &s, None).await;
        });
    }

    /// `session`'s turn ended: reported, and imrelay's answer, if any, is its next message.
    pub(super) fn idle(self: &Arc<Self>, session: String) {
        let mut steering = self.steering.locked();
        steering.busy.remove(&session);
        let (me, s) = (self.clone(), session.clone());
        steering.reports.send(&session, true, async move {
            let said = me.last_words(&s).await;
            if let Some(text) = me.report(TurnEvent::Stopped, &s, said).await {
                me.continue_with(&s, &text).await;
            }
        });
    }

    /// Tells imrelay of `event` in `session`; the prompt it answers with, if any.
    async fn report(
        &self,
        event: TurnEvent,
        session: &str,
        said: Option<String>,
    ) -> Option<String> {
        let cwd = self
            .get(&format!("/session/{}", segment(session)))
            .await
            .ok()
            .and_then(|s| s["directory"].as_str().map(str::to_string));
        let body = TurnBody {
            event,
            session: session.to_string(),
            cwd,
            agent: None,
            last_message: said,
        };
        let req = self
            .imrelay
            .request(reqwest::Method::POST, SESSION_PATH)
            .json(&body);
        match self.imrelay.call_within(req, None, TURN_WAIT).await {
            Ok(answer) => serde_json::from_value::<TurnReply>(answer).ok()?.prompt,
            Err(e) => {
                self.log(&format!(
                    "session {}'s turn was not reported to imrelay: {}",
                    escape(session),
                    escape(&e.to_string())
                ));
                None
            }
        }
    }

    /// The text of the model's last message in `session`, if OpenCode tells it.
    async fn last_words(&self, session: &str) -> Option<String> {
        let path = format!(
            "/session/{}/message?limit={LAST_MESSAGES}",
            segment(session)
        );
        let messages = self.get(&path).await.ok()?;
        let last = messages
            .as_array()?
            .iter()
            .rev()
            .find(|m| m["info"]["role"] == "assistant")?;
        let text: Vec<&str> = last["parts"]
            .as_array()?
            .iter()
            .filter(|p| p["type"] == "text")
            .filter_map(|p| p["text"].as_str())
            .collect();
        Some(text.join("\n")).filter(|t| !t.trim().is_empty())
    }

    /// Sends `text` to `session` as its next message (a person's words through imrelay).
    async fn continue_with(&self, session: &str, text: &str) {
        let path = format!("/session/{}/prompt_async", segment(session));
        let body = json!({"parts": [{"type": "text", "text": text}]});
        match self.post(&path, Some(&body)).await {
            Ok(()) => self.log(&format!(
                "sent session {} a person's words through imrelay",
                escape(session)
            )),
            Err(e) => self.log(&format!(
                "cannot send session {} a person's words: {}",
                escape(session),
                escape(&e.to_string())
            )),
        }
    }
}
