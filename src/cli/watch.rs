//! `imrelay watch`: answer approvals and questions from a terminal as they arrive.
//!
//! It follows a running imrelay's `/v1/events` and shows the pending interactions oldest
//! first, one at a time, with a count of the others. An approval shows the tool call as
//! [`crate::present`] reads it and takes `a` (allow), `d` (deny, with an optional
//! reason), `e` (edit the input in `$EDITOR`, then allow), `s` (skip: it stays pending and
//! comes back) or `q` (quit). A question shows its options numbered and takes a number,
//! several separated by commas (multi-select) or the person's own text, for every question
//! before anything is sent.
//!
//! What it promises:
//! - Something answered elsewhere while shown is said (by whom, through which channel) and
//!   the next one shown; what was being typed for it is shown, not sent anywhere else.
//! - The deadline counts down on the prompt; an expiry is said plainly.
//! - An answer that cannot be sent (imrelay down, the network gone) is kept and sent again
//!   until imrelay takes it or the deadline passes; a `409` says who answered first; quitting
//!   with an answer not yet confirmed prints the `imrelay answer` command that sends it.
//! - The event stream reconnects with `Last-Event-ID`; after a `reset` (imrelay restarted,
//!   or events missed) every interaction shown is checked again.
//! - Ctrl-C leaves cleanly at any prompt, the terminal restored.
//!
//! The loop is one task reacting to four sources: the event stream (`Feed`), the person
//! ([`Input`]), background work (sending, checking, editing) and a one-second tick.
//!
//! Each kind of interaction is one case of the `match` on [`Kind`] in `Watch::show`, which
//! prints it and picks its first step; a new kind adds a case there and its steps.

use std::collections::{HashSet, VecDeque};
use std::time::Duration;

use jiff::Timestamp;
use serde_json::{Map, Value};
use tokio::sync::mpsc;

use super::choose::{self, Choice};
use super::client::{ClientError, Feed, Remote, RemoteArgs, answer_command, exit};
use super::commands::{login_name, resolved_by_us};
use super::term::{Input, Term, Typed};
use super::view::{self, Paint};
use crate::interaction::{Answer, Form, Interaction, InteractionId, Kind, Outcome, Question};
use crate::present::{Budget, visible_line};

/// What `imrelay watch --help` adds: the keys and the exit codes.
const WATCH_HELP: &str = "\
Approvals: a allow · d deny (then a reason, optional) · e edit the input in $VISUAL or
$EDITOR, then allow · s skip (it stays pending and comes back) · q quit. Then Enter.
Questions: one option number, several separated by commas (multi-select), or your own
answer (a number as your own answer goes in quotes); s skip · d decline · q quit.
Ctrl-C leaves at any prompt; an answer imrelay has not confirmed is printed as the
`imrelay answer` command that sends it.

Exit status:
  0    quit (q, Ctrl-D, end of input, SIGTERM)
  1    any other error (a bad configuration or URL)
  5    the token is missing or not accepted
  130  Ctrl-C";

/// `imrelay watch`
#[derive(clap::Args)]
#[command(after_help = WATCH_HELP)]
pub struct WatchArgs {
    #[command(flatten)]
    remote: RemoteArgs,
    /// Who answers, as other channels will show it [default: your login name].
    #[arg(long, value_name = "NAME")]
    by: Option<String>,
}

/// Runs `imrelay watch` until the person quits; the exit code.
pub fn run(args: WatchArgs, config: Option<&std::path::Path>) -> i32 {
    let remote = match Remote::new(&args.remote, config) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("imrelay: {e:#}");
            return exit::ERROR;
        }
    };
    let by = args.by.filter(|b| !b.trim().is_empty()).or_else(login_name);
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("imrelay: {e}");
            return exit::ERROR;
        }
    };
    let code = rt.block_on(async move {
        let (term, input) = match Term::start() {
            Ok(t) => t,
            Err(e) => {
                eprintln!("imrelay: cannot set up the terminal: {e}");
                return exit::ERROR;
            }
        };
        Watch::new(remote, by, term).run(input).await
    });
    // The input thread may be blocked reading; it ends with the process.
    rt.shutdown_background();
    code
}

/// Results of work done beside the loop.
enum Done {
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
}

/// Where the person is with the interaction shown.
enum Step {
    /// An approval: a, d, e, s or q.
    Choose,
    /// The reason for a deny (or for declining a question).
    Reason,
    /// `$EDITOR` has the terminal.
    Editing,
    /// An edited input, to allow or not.
    Edited(Map<String, Value>),
    /// An edit that is not a JSON object; its text is kept for the next edit.
    EditFailed(String),
    /// A question; `answers` holds those already given.
    Asking {
        questions: Vec<Question>,
        answers: Vec<(Choice, Value)>,
    },
    /// A form, filled in field by field; `values` holds the fields done (`null`: left empty),
    /// `lines` the lines typed so far for a multi-line field (an empty line ends it).
    Filling {
        form: Form,
        values: Vec<Value>,
        lines: Option<Vec<String>>,
    },
    /// A question whose input cannot be read: it can be declined or skipped.
    Unreadable,
    /// The answer is on its way, with the rule (and scope) of "allow similar calls".
    Sending {
        answer: Answer,
        attempt: u32,
        grant: Option<(String, &'static str)>,
    },
    /// "Allow similar calls": the rule, proposed and editable.
    Similar(String),
    /// "Allow similar calls" by this rule: for the session, or standing.
    SimilarScope(String),
}

struct Current {
    i: Interaction,
    step: Step,
    /// How it was resolved while `$EDITOR` had the terminal, told when the editor closes.
    meanwhile: Option<Interaction>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Link {
    Connecting,
    Up,
    Down,
}

struct Watch {
    remote: Remote,
    by: Option<String>,
    term: Term,
    /// Pending interactions, oldest first.
    items: Vec<Interaction>,
    skipped: HashSet<InteractionId>,
    current: Option<Current>,
    link: Link,
    connected_once: bool,
    done_tx: mpsc::UnboundedSender<Done>,
    done_rx: mpsc::UnboundedReceiver<Done>,
    /// Plain mode: lines typed ahead, used when a prompt wants one.
    queued: VecDeque<String>,
    input_ended: bool,
    exit: Option<i32>,
    last_bell: Option<std::time::Instant>,
}

impl Watch {
    fn new(remote: Remote, by: Option<String>, term: Term) -> Watch {
        let (done_tx, done_rx) = mpsc::unbounded_channel();
        Watch {
            remote,
            by,
            term,
            items: Vec::new(),
            skipped: HashSet::new(),
            current: None,
            link: Link::Connecting,
            connected_once: false,
            done_tx,
            done_rx,
            queued: VecDeque::new(),
            input_ended: false,
            exit: None,
            last_bell: None,
        }
    }

    async fn run(mut self, mut input: mpsc::UnboundedReceiver<Input>) -> i32 {
        let (feed_tx, mut feed) = mpsc::channel(256);
        let follower = tokio::spawn(self.remote.clone().follow(feed_tx));
        let p = self.term.painter();
        self.term.say(&[
            p.paint(
                Paint::Bold,
                &format!("imrelay watch · {}", visible_line(self.remote.url())),
            ),
            p.paint(
                Paint::Dim,
                &format!(
                    "Answering as {}. Connecting…",
                    visible_line(self.by.as_deref().unwrap_or("(nobody: pass --by)"))
                ),
            ),
        ]);
        self.prompt();
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut signals = Signals::new();
        while self.exit.is_none() {
            tokio::select! {
                Some(f) = feed.recv() => self.on_feed(f),
                Some(i) = input.recv() => self.on_input(i).await,
                Some(d) = self.done_rx.recv() => self.on_done(d).await,
                _ = tick.tick() => self.on_tick(),
                s = signals.next() => {
                    // Ctrl-C while an editor runs is the editor's.
                    if !matches!(self.current, Some(Current { step: Step::Editing, .. })) {
                        self.quit(if s == Signal::Interrupt { exit::INTERRUPTED } else { exit::OK });
                    }
                }
            }
            self.drain_queue().await;
        }
        follower.abort();
        self.term.finish();
        self.exit.unwrap_or(exit::OK)
    }

    fn quit(&mut self, code: i32) {
        let p = self.term.painter();
        let mut lines = Vec::new();
        let typed = self.term.take_line();
        if let Some(c) = &self.current {
            match &c.step {
                Step::Sending { answer, grant, .. } => {
                    lines.push(p.paint(
                        Paint::Yellow,
                        "Your answer was not confirmed by imrelay. To send it later:",
                    ));
                    let mut command = answer_command(answer, c.i.id.as_str());
                    if let Some((rule, scope)) = grant {
                        let rule = shlex::try_quote(rule)
                            .map(|q| q.into_owned())
                            .unwrap_or_else(|_| rule.clone());
                        command.push_str(&format!(
                            " --similar {} --scope {scope}",
                            visible_line(&rule)
                        ));
                    }
                    lines.push(format!("  {command}"));
                }
                Step::Edited(input) => {
                    lines.push(p.paint(Paint::Yellow, "Your edited input was not sent:"));
                    lines.push(format!("  {}", Value::Object(input.clone())));
                }
                Step::EditFailed(text) => {
                    lines.push(p.paint(Paint::Yellow, "Your edited input was not sent:"));
                    lines.push(format!("  {}", visible_line(text)));
                }
                Step::Asking { questions, answers } if !answers.is_empty() => {
                    lines.push(p.paint(Paint::Yellow, "Your answers so far were not sent:"));
                    for ((choice, _), q) in answers.iter().zip(questions) {
                        lines.push(format!(
                            "  {} → {}",
                            visible_line(&q.question),
                            visible_line(&choice.words())
                        ));
                    }
                }
                _ => {}
            }
        }
        if !typed.trim().is_empty() {
            lines.push(p.paint(
                Paint::Yellow,
                &format!("Not sent, what you had typed: “{}”", visible_line(&typed)),
            ));
        }
        lines.push(
            match code {
                exit::INTERRUPTED => "Interrupted.",
                _ => "Bye.",
            }
            .to_string(),
        );
        self.term.say(&lines);
        self.exit = Some(code);
    }

    // ----- what is shown -----

    fn others(&self) -> usize {
        let shown = self.current.as_ref().map(|c| &c.i.id);
        self.items.iter().filter(|i| Some(&i.id) != shown).count()
    }

    fn status(&self) -> String {
        let now = Timestamp::now();
        let mut parts = Vec::new();
        if self.link == Link::Down {
            parts.push("offline".to_string());
        }
        if let Some(c) = &self.current {
            parts.push(view::clock(view::seconds_left(&c.i, now)));
            match self.others() {
                0 => {}
                n => parts.push(format!("{n} more")),
            }
        }
        if parts.is_empty() {
            String::new()
        } else {
            format!("[{}]", parts.join(" · "))
        }
    }

    fn prompt(&mut self) {
        let text = match &self.current {
            None if !self.connected_once => "connecting… (q quits) › ".to_string(),
            None if !self.skipped.is_empty() => format!(
                "{} skipped: Enter shows {} again · q quits › ",
                self.skipped.len(),
                if self.skipped.len() == 1 {
                    "it"
                } else {
                    "them"
                }
            ),
            None => "waiting for approvals and questions (q quits) › ".to_string(),
            Some(c) => match &c.step {
                Step::Choose if c.i.input_fixed => "a/d/g/s/q › ".to_string(),
                Step::Choose => "a/d/e/g/s/q › ".to_string(),
                Step::Reason if self.term.is_tty() => {
                    "reason for the agent (Enter for none, Esc goes back) › ".into()
                }
                Step::Reason => "reason for the agent (Enter for none) › ".into(),
                Step::Editing => "(editing…)".into(),
                Step::Edited(_) => "a allow with this input · e edit again · c cancel › ".into(),
                Step::EditFailed(_) => "e edit again · c cancel › ".into(),
                Step::Asking { questions, answers } => {
                    let q = &questions[answers.len().min(questions.len() - 1)];
                    if q.multi_select {
                        "numbers like 1,3, or your own answer › ".into()
                    } else {
                        format!("1–{}, or your own answer › ", q.options.len())
                    }
                }
                Step::Filling {
                    lines: Some(typed), ..
                } => format!("line {} (an empty line ends it) › ", typed.len() + 1),
                Step::Filling { form, .. } if form.is_single_text() => "your answer › ".into(),
                Step::Filling { form, values, .. } => match form.fields.get(values.len()) {
                    Some(f) if !f.options().is_empty() => {
                        format!("{}: 1–{} › ", visible_line(f.label()), f.options().len())
                    }
                    Some(f) => format!("{} › ", visible_line(f.label())),
                    None => "› ".into(),
                },
                Step::Unreadable => "d/s/q › ".into(),
                Step::Similar(rule) => format!(
                    "allow similar calls by {} (Enter keeps it, or type another rule; c cancels) › ",
                    visible_line(rule)
                ),
                Step::SimilarScope(_) => {
                    "s for this session · a always (until revoked) · c cancel › ".into()
                }
                Step::Sending { attempt: 1, .. } => "sending… ".into(),
                Step::Sending { attempt, .. } => format!("sending… (attempt {attempt}) "),
            },
        };
        let status = self.status();
        self.term.set_prompt(status, text);
    }

    fn ring(&mut self) {
        let now = std::time::Instant::now();
        if self
            .last_bell
            .is_none_or(|t| now.duration_since(t) > Duration::from_secs(1))
        {
            self.term.bell();
            self.last_bell = Some(now);
        }
    }

    /// Shows the oldest interaction not skipped; when only skipped ones wait, they come
    /// back, unless the person skipped just now.
    fn show_next(&mut self, just_skipped: bool) {
        let had_typed = self.term.take_line();
        self.current = None;
        let mut next = self
            .items
            .iter()
            .find(|i| !self.skipped.contains(&i.id))
            .cloned();
        if next.is_none() && !self.skipped.is_empty() && !just_skipped {
            self.skipped.clear();
            self.term.say1(
                self.term
                    .painter()
                    .paint(Paint::Dim, "Back to what you skipped."),
            );
            next = self.items.first().cloned();
        }
        if !had_typed.trim().is_empty() {
            self.term.say1(self.term.painter().paint(
                Paint::Yellow,
                &format!(
                    "(Not sent, what you had typed: “{}”)",
                    visible_line(&had_typed)
                ),
            ));
        }
        match next {
            Some(i) => self.show(i),
            None => self.prompt(),
        }
    }

    fn show(&mut self, i: Interaction) {
        let p = self.term.painter();
        let now = Timestamp::now();
        let mut lines = vec![String::new(), view::heading(&p, &i, self.term.width())];
        lines.extend(view::context(&p, &i, now));
        lines.push(String::new());
        let step = match i.kind {
            Kind::Approval => {
                lines.extend(view::tool_call(&p, &i, Budget::TERMINAL));
                lines.push(String::new());
                // An agent that cannot run an edited input (Codex) is offered no edit.
                let choices: &[(&str, &str)] = if i.input_fixed {
                    &[
                        ("a", "allow"),
                        ("d", "deny"),
                        ("g", "allow similar calls"),
                        ("s", "skip"),
                        ("q", "quit"),
                    ]
                } else {
                    &[
                        ("a", "allow"),
                        ("d", "deny"),
                        ("e", "edit, then allow"),
                        ("g", "allow similar calls"),
                        ("s", "skip"),
                        ("q", "quit"),
                    ]
                };
                lines.push(keys(&p, choices));
                Step::Choose
            }
            Kind::Form => match Form::from_input(&i.input.map()) {
                Ok(form) => {
                    lines.extend(view::form_view(&p, &form, Some(0)));
                    lines.push(String::new());
                    lines.push(keys(&p, &[("s", "skip"), ("d", "decline"), ("q", "quit")]));
                    Step::Filling {
                        form,
                        values: Vec::new(),
                        lines: None,
                    }
                }
                Err(e) => {
                    lines.push(format!(
                        "  This form cannot be read ({}).",
                        visible_line(&e.to_string())
                    ));
                    lines.push(keys(&p, &[("d", "decline"), ("s", "skip"), ("q", "quit")]));
                    Step::Unreadable
                }
            },
            Kind::Question => match crate::interaction::parse_questions(&i.input.map()) {
                Ok(questions) => {
                    lines.extend(view::question(&p, &questions[0], 1, questions.len(), true));
                    lines.push(String::new());
                    lines.push(keys(
                        &p,
                        &[("s", "skip"), ("d", "decline to answer"), ("q", "quit")],
                    ));
                    Step::Asking {
                        questions,
                        answers: Vec::new(),
                    }
                }
                Err(e) => {
                    lines.push(format!(
                        "  These questions cannot be read ({}).",
                        visible_line(&e.to_string())
                    ));
                    lines.push(keys(&p, &[("d", "decline"), ("s", "skip"), ("q", "quit")]));
                    Step::Unreadable
                }
            },
        };
        self.current = Some(Current {
            i,
            step,
            meanwhile: None,
        });
        self.term.say(&lines);
        self.term.fresh_prompt();
        self.prompt();
        self.ring();
    }

    fn set_step(&mut self, step: Step) {
        if let Some(c) = &mut self.current {
            c.step = step;
        }
        self.term.fresh_prompt();
        self.prompt();
    }

    fn say_error(&mut self, text: &str) {
        let line = self.term.painter().paint(Paint::Yellow, text);
        self.term.say1(line);
    }

    // ----- the event stream -----

    fn on_feed(&mut self, feed: Feed) {
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
            Feed::Created(i) => self.add(i),
            Feed::Resolved(i) => self.resolved(i, false),
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

    fn add(&mut self, i: Interaction) {
        if !i.is_pending() {
            return self.resolved(i, false);
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
    fn check_all(&self) {
        for i in &self.items {
            let (remote, tx, id) = (self.remote.clone(), self.done_tx.clone(), i.id.clone());
            tokio::spawn(async move {
                let result = remote.get(id.as_str()).await;
                let _ = tx.send(Done::Checked { id, result });
            });
        }
    }

    /// `i` was resolved; `gone` when it no longer exists at all.
    fn resolved(&mut self, i: Interaction, gone: bool) {
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
    fn tell_resolved(&mut self, i: Interaction, gone: bool) {
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

    // ----- background results -----

    async fn on_done(&mut self, done: Done) {
        match done {
            Done::Checked { id, result } => match result {
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
            },
            Done::Retrying {
                id,
                attempt,
                error,
                wait,
            } => {
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
                        visible_line(&error),
                        wait.as_secs_f32().ceil()
                    );
                    self.say_error(&text);
                }
                self.prompt();
            }
            Done::Sent { id, result, grant } => self.sent(id, result, grant),
            Done::Edited { id, result } => self.edited(id, result).await,
        }
    }

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
        let p = self.term.painter();
        let now = Timestamp::now();
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
            Ok(i) => {
                let mut lines: Vec<String> = view::outcome_line(&p, &i, now).into_iter().collect();
                lines.extend(view::given_answers(&i));
                if let Some(g) = grant.as_ref().filter(|g| g.is_object()) {
                    lines.push(p.paint(
                        Paint::Green,
                        &format!("Granted: {}", super::grants::describe(g)),
                    ));
                    if i.suggestions.is_some() {
                        lines.push(p.paint(
                            Paint::Dim,
                            "The agent also remembers its own suggestion for this session.",
                        ));
                    }
                }
                self.term.say(&lines);
                self.forget(&id);
                self.show_next(false);
            }
            Err(ClientError::AlreadyResolved(i)) => {
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
                lines.extend(view::outcome_line(&p, &i, now));
                lines.extend(view::given_answers(&i));
                self.term.say(&lines);
                self.forget(&id);
                self.show_next(false);
            }
            Err(ClientError::NotFound(_)) => {
                self.say_error("⚑ Not sent: it is gone from imrelay (resolved and pruned).");
                self.forget(&id);
                self.show_next(false);
            }
            Err(e @ ClientError::Unauthorized { .. }) => {
                self.say_error(&format!("imrelay: {}", visible_line(&e.to_string())));
                self.quit(e.exit_code());
            }
            Err(e @ (ClientError::Unreachable { .. } | ClientError::Unavailable { .. })) => {
                // Only after the deadline: until then it is tried again.
                self.say_error(&format!(
                    "⚑ Not sent: the deadline passed while imrelay could not take it ({}).",
                    visible_line(&e.to_string())
                ));
                self.forget(&id);
                self.show_next(false);
            }
            Err(e @ (ClientError::Invalid { .. } | ClientError::Protocol(_))) => {
                self.say_error(&format!(
                    "imrelay did not take the answer: {}",
                    visible_line(&e.to_string())
                ));
                // Back to where it was given.
                let step = match answer {
                    Answer::Allow {
                        updated_input: Some(m),
                        ..
                    } => Step::Edited(m),
                    _ => Step::Choose,
                };
                match step {
                    Step::Choose => self.show(shown),
                    step => self.set_step(step),
                }
            }
        }
    }

    fn forget(&mut self, id: &InteractionId) {
        self.items.retain(|i| &i.id != id);
        self.skipped.remove(id);
    }

    fn send(&mut self, answer: Answer) {
        self.send_granting(answer, None);
    }

    /// Sends `answer`, granting `grant` (a rule and `session` or `standing`) with it.
    fn send_granting(&mut self, answer: Answer, grant: Option<(String, &'static str)>) {
        let Some(c) = &self.current else { return };
        let (id, deadline) = (c.i.id.clone(), c.i.deadline);
        self.set_step(Step::Sending {
            answer: answer.clone(),
            attempt: 1,
            grant: grant.clone(),
        });
        let (remote, tx, by) = (self.remote.clone(), self.done_tx.clone(), self.by.clone());
        tokio::spawn(async move {
            let mut backoff = super::client::Backoff::default();
            let mut attempt = 1;
            loop {
                let mut granted = None;
                let result = match &grant {
                    None => remote.respond(id.as_str(), &answer, by.as_deref()).await,
                    Some((rule, scope)) => remote
                        .respond_granting(id.as_str(), &answer, by.as_deref(), Some(rule), scope)
                        .await
                        .map(|(i, g)| {
                            granted = Some(g);
                            i
                        }),
                };
                match result {
                    // Tried again until the deadline (and a little after, for the clocks).
                    Err(e)
                        if e.is_transient()
                            && Timestamp::now() < deadline + jiff::SignedDuration::from_secs(5) =>
                    {
                        let wait = backoff.delay();
                        let retry = Done::Retrying {
                            id: id.clone(),
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
                            id,
                            result,
                            grant: granted,
                        });
                        return;
                    }
                }
            }
        });
    }

    // ----- the person -----

    async fn on_input(&mut self, input: Input) {
        match input {
            Input::Key(k) => match self.term.key(k) {
                Typed::Submit(line) => self.on_line(line).await,
                Typed::Interrupt => self.quit(exit::INTERRUPTED),
                Typed::Eof => self.quit(exit::OK),
                Typed::Escape => {
                    if let Some(Current {
                        i,
                        step: Step::Reason,
                        ..
                    }) = &self.current
                    {
                        let i = i.clone();
                        self.term
                            .say1(self.term.painter().paint(Paint::Dim, "(back)"));
                        self.show(i);
                    }
                }
                Typed::Edited => {}
            },
            Input::Paste(text) => self.term.paste(&text),
            Input::Resized => self.prompt(),
            Input::Line(line) => {
                self.queued.push_back(line);
                self.drain_queue().await;
            }
            Input::Eof => {
                self.input_ended = true;
                if self.term.is_tty() {
                    self.quit(exit::OK);
                } else {
                    self.drain_queue().await;
                }
            }
        }
    }

    /// Whether the step shown takes a line now.
    fn wants_line(&self) -> bool {
        match &self.current {
            None => false,
            Some(c) => !matches!(c.step, Step::Sending { .. } | Step::Editing),
        }
    }

    /// Plain mode: hands typed-ahead lines to prompts that want one. With nothing to answer,
    /// only a `q` next in line is taken; the end of input ends the session at the next prompt.
    async fn drain_queue(&mut self) {
        if self.term.is_tty() {
            return;
        }
        while self.exit.is_none() {
            if self.wants_line() {
                match self.queued.pop_front() {
                    Some(line) => {
                        self.term.echo(&line);
                        self.on_line(line).await;
                    }
                    None if self.input_ended => {
                        self.term.say1("(end of input)");
                        self.quit(exit::OK);
                    }
                    None => break,
                }
            } else if self.current.is_none()
                && self
                    .queued
                    .front()
                    .is_some_and(|l| is_quit(&l.trim().to_lowercase()))
            {
                let line = self.queued.pop_front().unwrap_or_default();
                self.term.echo(&line);
                self.on_line(line).await;
            } else {
                break;
            }
        }
    }

    async fn on_line(&mut self, line: String) {
        let word = line.trim().to_lowercase();
        let Some(c) = &self.current else {
            match word.as_str() {
                w if is_quit(w) => self.quit(exit::OK),
                "" if !self.skipped.is_empty() => self.show_next(false),
                "" => {}
                _ => self.say_error("Nothing to answer right now."),
            }
            return;
        };
        let i = c.i.clone();
        match &c.step {
            Step::Choose => match word.as_str() {
                "a" | "allow" => self.send(Answer::Allow {
                    updated_input: None,
                    always: false,
                }),
                "d" | "deny" => self.set_step(Step::Reason),
                "e" | "edit" if i.input_fixed => self.say_error(&format!(
                    "{} cannot run an edited input: type a (allow) or d (deny).",
                    i.agent
                        .as_deref()
                        .map(visible_line)
                        .unwrap_or("This agent".into())
                )),
                "e" | "edit" => self.edit(pretty(&i.input.map())).await,
                "g" | "similar" => {
                    let proposed = crate::interaction::policy::propose(&i).unwrap_or_default();
                    self.set_step(Step::Similar(proposed));
                }
                "s" | "skip" => self.skip(),
                w if is_quit(w) => self.quit(exit::OK),
                "" => {}
                _ => self.say_error(
                    "Type a (allow), d (deny), e (edit), g (allow similar calls), s (skip) or q (quit), then Enter.",
                ),
            },
            Step::Similar(proposed) => {
                let typed = line.trim();
                let rule = if typed.is_empty() {
                    proposed.clone()
                } else {
                    typed.to_string()
                };
                match (typed, rule.as_str()) {
                    ("c" | "cancel", _) => self.show(i),
                    (_, "") => self.say_error("Type the rule to allow, e.g. Bash(npm run test:*)"),
                    _ => match crate::interaction::policy::check_rule(&rule) {
                        Ok(()) => self.set_step(Step::SimilarScope(rule)),
                        Err(e) => self.say_error(&format!(
                            "{}: {}",
                            visible_line(&rule),
                            visible_line(&e.message)
                        )),
                    },
                }
            }
            Step::SimilarScope(rule) => {
                let rule = rule.clone();
                let allow = Answer::Allow {
                    updated_input: None,
                    always: false,
                };
                match word.as_str() {
                    "s" | "session" => self.send_granting(allow, Some((rule, "session"))),
                    "a" | "always" | "standing" => {
                        self.send_granting(allow, Some((rule, "standing")))
                    }
                    "c" | "cancel" => self.show(i),
                    "" => {}
                    _ => self.say_error("Type s (this session), a (always) or c (cancel)."),
                }
            }
            Step::Reason => {
                let reason = line.trim();
                self.send(Answer::Deny {
                    message: (!reason.is_empty()).then(|| reason.to_string()),
                    interrupt: false,
                });
            }
            Step::Editing | Step::Sending { .. } => {
                self.say_error("Still sending the answer…");
            }
            Step::Edited(input) => {
                let input = input.clone();
                match word.as_str() {
                    "a" | "allow" => self.send(Answer::Allow {
                        updated_input: Some(input),
                        always: false,
                    }),
                    "e" | "edit" => self.edit(pretty(&input)).await,
                    "c" | "cancel" => self.show(i),
                    "s" | "skip" => self.skip(),
                    w if is_quit(w) => self.quit(exit::OK),
                    "" => {}
                    _ => self
                        .say_error("Type a (allow with this input), e (edit again) or c (cancel)."),
                }
            }
            Step::EditFailed(text) => {
                let text = text.clone();
                match word.as_str() {
                    "e" | "edit" => self.edit(text).await,
                    "c" | "cancel" => self.show(i),
                    w if is_quit(w) => self.quit(exit::OK),
                    "" => {}
                    _ => self.say_error("Type e (edit again) or c (cancel)."),
                }
            }
            Step::Unreadable => match word.as_str() {
                "d" | "decline" | "deny" => self.set_step(Step::Reason),
                "s" | "skip" => self.skip(),
                w if is_quit(w) => self.quit(exit::OK),
                _ => self.say_error("Type d (decline), s (skip) or q (quit)."),
            },
            Step::Asking { .. } => match word.as_str() {
                "s" | "skip" => self.skip(),
                "d" | "decline" => self.set_step(Step::Reason),
                w if is_quit(w) => self.quit(exit::OK),
                _ => self.answer_question(&line),
            },
            Step::Filling { .. } => match word.as_str() {
                "s" | "skip" => self.skip(),
                "d" | "decline" => self.set_step(Step::Reason),
                w if is_quit(w) => self.quit(exit::OK),
                _ => self.fill_field(&line),
            },
        }
    }

    fn skip(&mut self) {
        if let Some(c) = &self.current {
            self.skipped.insert(c.i.id.clone());
            let others = self.items.iter().any(|i| !self.skipped.contains(&i.id));
            self.term.say1(self.term.painter().paint(
                Paint::Dim,
                if others {
                    "Skipped: it stays pending and comes back after the others."
                } else {
                    "Skipped: it stays pending. Nothing else is waiting."
                },
            ));
        }
        self.show_next(true);
    }

    fn answer_question(&mut self, line: &str) {
        let p = self.term.painter();
        let Some(Current {
            step: Step::Asking { questions, answers },
            ..
        }) = &mut self.current
        else {
            return;
        };
        let q = &questions[answers.len()];
        let choice = match choose::parse_choice(q, line) {
            Ok(c) => c,
            Err(e) => return self.say_error(&e),
        };
        let value = choice.value(q);
        let words = choice.words();
        answers.push((choice, value));
        let mut lines = vec![p.paint(Paint::Green, &format!("    → {}", visible_line(&words)))];
        if answers.len() < questions.len() {
            lines.push(String::new());
            lines.extend(view::question(
                &p,
                &questions[answers.len()],
                answers.len() + 1,
                questions.len(),
                true,
            ));
            self.term.say(&lines);
            self.term.fresh_prompt();
            self.prompt();
            return;
        }
        let map: Map<String, Value> = questions
            .iter()
            .zip(answers.iter())
            .map(|(q, (_, v))| (q.question.clone(), v.clone()))
            .collect();
        self.term.say(&lines);
        self.send(Answer::Answers(map));
    }

    /// A line for the form field being asked: its value (read as the field's type), or an
    /// empty line for an optional field's default. The last field sends the form.
    fn fill_field(&mut self, line: &str) {
        let p = self.term.painter();
        let Some(Current {
            step:
                Step::Filling {
                    form,
                    values,
                    lines,
                },
            ..
        }) = &mut self.current
        else {
            return;
        };
        let Some(field) = form.fields.get(values.len()) else {
            return;
        };
        let multiline = matches!(
            field.ty,
            crate::interaction::form::FieldType::Text {
                multiline: true,
                ..
            }
        );
        // A multi-line field takes lines until an empty one.
        let joined;
        let line = match (multiline, lines.as_mut()) {
            (true, None) if !line.trim().is_empty() => {
                *lines = Some(vec![line.to_string()]);
                self.prompt();
                return;
            }
            (true, Some(typed)) if !line.is_empty() => {
                typed.push(line.to_string());
                self.prompt();
                return;
            }
            (true, Some(typed)) => {
                joined = typed.join("\n");
                *lines = None;
                joined.as_str()
            }
            _ => line,
        };
        let value = if line.trim().is_empty() {
            if field.required && field.default.is_none() {
                let e = format!("{} is required.", field.label());
                return self.say_error(&e);
            }
            Value::Null
        } else {
            match field.parse_text(line) {
                Ok(v) => v,
                Err(e) => {
                    let e = format!("{}: {e}", field.label());
                    return self.say_error(&e);
                }
            }
        };
        let shown = match (&value, &field.default) {
            (Value::Null, Some(d)) => format!("{} (default)", field.show(d)),
            (Value::Null, None) => "(left empty)".to_string(),
            (v, _) => field.show(v),
        };
        values.push(value);
        let mut lines = vec![p.paint(Paint::Green, &format!("    → {}", visible_line(&shown)))];
        if values.len() < form.fields.len() {
            let n = values.len();
            lines.extend(view::field_lines(
                &p,
                &form.fields[n],
                n,
                view::Detail::Asked,
            ));
            self.term.say(&lines);
            self.term.fresh_prompt();
            self.prompt();
            return;
        }
        let content: Map<String, Value> = form
            .fields
            .iter()
            .zip(values.iter())
            .filter(|(_, v)| !v.is_null())
            .map(|(f, v)| (f.name.clone(), v.clone()))
            .collect();
        // A single question's answer is on the line just typed, and shown again once taken.
        if !form.is_single_text() {
            self.term.say(&lines);
        }
        self.send(Answer::Accept(content));
    }

    // ----- editing -----

    async fn edit(&mut self, text: String) {
        if !self.term.is_tty() {
            return self.say_error("Editing needs a terminal on standard input and output.");
        }
        let Some(c) = &self.current else { return };
        let id = c.i.id.clone();
        self.set_step(Step::Editing);
        self.term.suspend().await;
        let tx = self.done_tx.clone();
        tokio::spawn(async move {
            let result = run_editor(&text).await;
            let _ = tx.send(Done::Edited { id, result });
        });
    }

    async fn edited(&mut self, id: InteractionId, result: Result<String, String>) {
        self.term.resume();
        let Some(c) = &mut self.current else { return };
        if c.i.id != id {
            return;
        }
        let i = c.i.clone();
        if let Some(resolved) = c.meanwhile.take() {
            // Answered elsewhere while the editor had the terminal: said now, and what was
            // edited is shown so it is not lost.
            c.step = Step::Choose;
            if let Ok(text) = &result {
                let line = self.term.painter().paint(
                    Paint::Yellow,
                    &format!(
                        "(Your edited input was not sent: {})",
                        visible_line(text.trim())
                    ),
                );
                self.term.say1(line);
            }
            return self.tell_resolved(resolved, false);
        }
        let text = match result {
            Ok(t) => t,
            Err(e) => {
                self.say_error(&format!("The editor did not run: {}", visible_line(&e)));
                return self.show(i);
            }
        };
        match serde_json::from_str::<Value>(&text) {
            Ok(Value::Object(input)) => {
                let p = self.term.painter();
                let mut lines = vec![String::new(), p.paint(Paint::Bold, "Edited input:")];
                let pr = crate::present::present(
                    &i.tool_name,
                    &input,
                    i.cwd.as_deref(),
                    Budget::TERMINAL,
                );
                lines.extend(view::presentation_lines(&p, &pr, "e"));
                if input == i.input.map() {
                    lines.push(p.paint(Paint::Dim, "  (unchanged)"));
                }
                self.term.say(&lines);
                self.set_step(Step::Edited(input));
            }
            Ok(other) => {
                self.say_error(&format!(
                    "The input must be a JSON object, not {}.",
                    crate::interaction::json_type(&other)
                ));
                self.set_step(Step::EditFailed(text));
            }
            Err(e) => {
                self.say_error(&format!("That is not valid JSON: {e}."));
                self.set_step(Step::EditFailed(text));
            }
        }
    }

    // ----- time -----

    fn on_tick(&mut self) {
        let status = self.status();
        self.term.refresh_status(status);
    }
}

fn is_quit(word: &str) -> bool {
    matches!(word, "q" | "quit" | "exit")
}

fn keys(p: &view::Painter, keys: &[(&str, &str)]) -> String {
    keys.iter()
        .map(|(k, what)| format!("{} {what}", p.paint(Paint::Bold, k)))
        .collect::<Vec<_>>()
        .join(" · ")
}

fn pretty(input: &Map<String, Value>) -> String {
    serde_json::to_string_pretty(&Value::Object(input.clone())).unwrap_or_default() + "\n"
}

/// Writes `text` to a temporary file, opens it in `$VISUAL` or `$EDITOR` (else `vi`) and
/// returns what the file holds after.
async fn run_editor(text: &str) -> Result<String, String> {
    let file = tempfile::Builder::new()
        .prefix("imrelay-input-")
        .suffix(".json")
        .tempfile()
        .map_err(|e| e.to_string())?;
    std::fs::write(file.path(), text).map_err(|e| e.to_string())?;
    let editor = ["VISUAL", "EDITOR"]
        .iter()
        .filter_map(|k| std::env::var(k).ok())
        .find(|v| !v.trim().is_empty())
        .unwrap_or_else(|| "vi".to_string());
    // Through the shell, as git does, so that `EDITOR="code --wait"` works.
    let status = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{editor} \"$1\""))
        .arg("sh")
        .arg(file.path())
        .status()
        .await
        .map_err(|e| format!("{editor}: {e}"))?;
    if !status.success() {
        return Err(format!("{editor} exited with {status}"));
    }
    std::fs::read_to_string(file.path()).map_err(|e| e.to_string())
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Signal {
    Interrupt,
    Terminate,
}

/// SIGINT (Ctrl-C outside raw mode), SIGTERM and SIGHUP.
struct Signals {
    #[cfg(unix)]
    int: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    term: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    hup: Option<tokio::signal::unix::Signal>,
}

impl Signals {
    fn new() -> Signals {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Signals {
                int: signal(SignalKind::interrupt()).ok(),
                term: signal(SignalKind::terminate()).ok(),
                hup: signal(SignalKind::hangup()).ok(),
            }
        }
        #[cfg(not(unix))]
        Signals {}
    }

    async fn next(&mut self) -> Signal {
        #[cfg(unix)]
        {
            async fn recv(s: &mut Option<tokio::signal::unix::Signal>) {
                match s {
                    Some(s) => {
                        if s.recv().await.is_none() {
                            std::future::pending::<()>().await;
                        }
                    }
                    None => std::future::pending::<()>().await,
                }
            }
            tokio::select! {
                _ = recv(&mut self.int) => Signal::Interrupt,
                _ = recv(&mut self.term) => Signal::Terminate,
                _ = recv(&mut self.hup) => Signal::Terminate,
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            Signal::Interrupt
        }
    }
}
