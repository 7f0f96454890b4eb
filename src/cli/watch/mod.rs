//! `imrelay watch`: answer approvals and questions from a terminal as they arrive.
//!
//! It follows a running imrelay's `/v1/events` and shows the pending interactions oldest
//! first, one at a time, with a count of the others. An approval shows the tool call as
//! [`crate::present`] reads it and takes `a` (allow), `d` (deny, with an optional
//! reason), `e` (edit the input in `$EDITOR`, then allow), `g` (allow similar calls by a
//! rule), `s` (skip: it stays pending and comes back) or `q` (quit); one that several people
//! decide takes neither `e` nor `g`. A question shows its options numbered and takes a number,
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
//! The loop is one task reacting to four sources: the event stream (`Feed`, reconciled in
//! `feed.rs`), the person ([`Input`]; what a line does at each step in `steps.rs`, apart
//! from the terminal), background work (sending and retrying in `send.rs`, checking, the
//! editor in `editor.rs`) and a one-second tick. `show.rs` prints an interaction and the
//! prompt.
//!
//! Each kind of interaction is one case of the `match` on `Kind` in `steps::first`, which
//! picks its first step, and one in `Watch::show`, which prints it; a new kind adds a case
//! there and its steps.

mod editor;
mod feed;
mod send;
mod show;
mod steps;

use std::collections::{HashSet, VecDeque};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::mpsc;

use self::editor::{Signal, Signals};
use self::feed::Filter;
use self::send::Done;
use self::steps::{Act, Step, Then, is_quit};
use super::client::{Operator, Remote, RemoteArgs, answer_command, exit};
use super::login_name;
use super::term::{Input, Term, Typed};
use super::view::{self, Paint};
use crate::interaction::{Interaction, InteractionId};
use crate::present::visible_line;

/// How long the start waits to learn who the token answers as before greeting.
const ME_WAIT: Duration = Duration::from_secs(2);

/// What `imrelay watch --help` adds: the keys and the exit codes.
const WATCH_HELP: &str = "\
Approvals: a allow · d deny (then a reason, optional) · e edit the input in $VISUAL or
$EDITOR, then allow · g allow similar calls (a rule, proposed and editable; then s for this
session or a until revoked) · s skip (it stays pending and comes back) · q quit. Then Enter.
An approval several people decide takes no e or g: each allows it as it is.
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
    /// Who answers, as other channels will show it [default: your login name]. A labelled
    /// operator token answers as its person instead.
    #[arg(long, value_name = "NAME")]
    by: Option<String>,
    #[command(flatten)]
    filter: Filter,
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
    let given = args.by.filter(|b| !b.trim().is_empty());
    let by = given.clone().or_else(login_name);
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
        let mut watch = Watch::new(remote, by, args.filter, term);
        watch.by_given = given;
        watch.run(input).await
    });
    // The input thread may be blocked reading; it ends with the process.
    rt.shutdown_background();
    code
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
    /// The name answers go under: the token's person, `--by`, or the login name.
    by: Option<String>,
    /// `--by`, as given.
    by_given: Option<String>,
    /// The token's person, when the token is labelled (`GET /v1/me`); `None` until known.
    operator: Option<Operator>,
    /// Whether `GET /v1/me` has answered.
    knows_me: bool,
    /// Approvals several people decide on which this person's vote is counted: not shown
    /// again while the others decide.
    voted: HashSet<InteractionId>,
    /// Which interactions are shown.
    filter: Filter,
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
    fn new(remote: Remote, by: Option<String>, filter: Filter, term: Term) -> Watch {
        let (done_tx, done_rx) = mpsc::unbounded_channel();
        Watch {
            remote,
            by,
            by_given: None,
            operator: None,
            knows_me: false,
            voted: HashSet::new(),
            filter,
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
        // "Desk first": while this runs, its person is at the desk.
        let presence = tokio::spawn(self.remote.clone().at_desk());
        // Who answers, before saying so; a server not reachable yet is asked again once the
        // stream is up.
        if let Ok(Ok(me)) = tokio::time::timeout(ME_WAIT, self.remote.me()).await {
            self.knows_me = true;
            self.operator = me;
        }
        if let Some(op) = &self.operator {
            self.by = Some(op.name.clone());
        }
        self.greet();
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
        presence.abort();
        // Left the desk: phones are told at once from now on (best effort, briefly).
        let _ = tokio::time::timeout(Duration::from_secs(2), self.remote.presence(false)).await;
        self.term.finish();
        self.exit.unwrap_or(exit::OK)
    }

    /// The first lines: which imrelay, who answers, and what is shown.
    fn greet(&mut self) {
        let p = self.term.painter();
        let mut lines = vec![
            p.paint(
                Paint::Bold,
                &format!("imrelay watch · {}", visible_line(self.remote.url())),
            ),
            p.paint(Paint::Dim, &format!("{} Connecting…", self.answering_as())),
        ];
        if let Some(only) = self.filter.describe() {
            lines.push(p.paint(Paint::Dim, &format!("Showing only {only}.")));
        }
        self.term.say(&lines);
    }

    /// "Answering as alice (token alice-term)." — the token's person when the token is
    /// labelled (the server records that name, whatever `--by` says: a different `--by` is
    /// said to be unused), else `--by` or the login name.
    fn answering_as(&self) -> String {
        match &self.operator {
            Some(op) => {
                let who = format!(
                    "Answering as {} (token {})",
                    visible_line(&op.name),
                    visible_line(&op.label)
                );
                match self.by_given.as_deref().filter(|g| *g != op.name) {
                    Some(given) => format!(
                        "{who}, not {}: imrelay records the token's person.",
                        visible_line(given)
                    ),
                    None => format!("{who}."),
                }
            }
            None => format!(
                "Answering as {}.",
                visible_line(self.by.as_deref().unwrap_or("(nobody: pass --by)"))
            ),
        }
    }

    /// `GET /v1/me` answered after the greeting (the server was not reachable then): a
    /// labelled token's person is said, and answers go under that name.
    fn learned_me(&mut self, me: Option<Operator>) {
        self.knows_me = true;
        let Some(op) = me else { return };
        self.by = Some(op.name.clone());
        self.operator = Some(op);
        let line = self.term.painter().paint(Paint::Dim, &self.answering_as());
        self.term.say1(line);
        self.prompt();
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
        let Some(c) = &mut self.current else {
            match line.trim().to_lowercase().as_str() {
                w if is_quit(w) => self.quit(exit::OK),
                "" if !self.skipped.is_empty() => self.show_next(false),
                "" => {}
                _ => self.say_error("Nothing to answer right now."),
            }
            return;
        };
        let i = c.i.clone();
        match c.step.take(&i, &line) {
            Act::Nothing => {}
            Act::Error(e) => self.say_error(&e),
            Act::Step(step) => self.set_step(step),
            Act::Show => self.show(i),
            Act::Skip => self.skip(),
            Act::Quit => self.quit(exit::OK),
            Act::Edit(text) => self.edit(text).await,
            Act::Send(answer, grant) => self.send_granting(answer, grant),
            Act::Took { shown, then } => self.took(shown, then),
            Act::Line => self.prompt(),
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

    /// A question answered or a field filled in: said, then the next asked, or all sent.
    fn took(&mut self, shown: Option<String>, then: Then) {
        let p = self.term.painter();
        let mut lines: Vec<String> = shown
            .iter()
            .map(|s| p.paint(Paint::Green, &format!("    → {}", visible_line(s))))
            .collect();
        let answer = match then {
            Then::Send(answer) => answer,
            Then::NextQuestion | Then::NextField => {
                match self.current.as_ref().map(|c| &c.step) {
                    Some(Step::Asking { questions, answers }) => {
                        lines.push(String::new());
                        lines.extend(view::question(
                            &p,
                            &questions[answers.len()],
                            answers.len() + 1,
                            questions.len(),
                            true,
                        ));
                    }
                    Some(Step::Filling { form, draft, .. }) => {
                        if let Some((n, next)) = draft.asked(form) {
                            lines.extend(view::field_lines(&p, next, n, view::Detail::Asked));
                        }
                    }
                    _ => {}
                }
                self.term.say(&lines);
                self.term.fresh_prompt();
                return self.prompt();
            }
        };
        if !lines.is_empty() {
            self.term.say(&lines);
        }
        self.send(answer);
    }

    // ----- time -----

    fn on_tick(&mut self) {
        let status = self.status();
        self.term.refresh_status(status);
    }
}
