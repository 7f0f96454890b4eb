//! The scriptable terminal commands: `imrelay pending` lists what waits, `imrelay show ID`
//! shows one interaction in full, `imrelay answer ID ...` answers one. Each exits with a code
//! a script can rely on ([`super::client::exit`]).

use std::io::Write;

use serde_json::{Map, Value};

use super::client::{ClientError, Listed, Remote, RemoteArgs, exit};
use super::view::{self, Painter};
use crate::interaction::Answer;
use crate::interaction::{Interaction, Kind};
use crate::present::visible_line;
use crate::telemetry::escape_json_invisible;

/// `imrelay pending`
#[derive(clap::Args)]
#[command(after_help = super::EXIT_CODES)]
pub struct PendingArgs {
    #[command(flatten)]
    remote: RemoteArgs,
    /// Print the interactions as a JSON array, as the API returns them (with every
    /// question's `multiSelect` stated).
    #[arg(long)]
    json: bool,
}

/// `imrelay show`
#[derive(clap::Args)]
#[command(after_help = super::EXIT_CODES)]
pub struct ShowArgs {
    #[command(flatten)]
    remote: RemoteArgs,
    /// The interaction's id.
    id: String,
    /// Print the interaction as JSON, as the API returns it (with every question's
    /// `multiSelect` stated).
    #[arg(long)]
    json: bool,
}

/// An approval's decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Decision {
    /// Let the agent run the tool.
    Allow,
    /// Do not let it (for a question: decline to answer).
    Deny,
}

/// `imrelay answer`
#[derive(clap::Args)]
#[command(after_help = super::EXIT_CODES)]
pub struct AnswerArgs {
    #[command(flatten)]
    remote: RemoteArgs,
    /// Who answers, as other channels will show it [default: your login name].
    #[arg(long, value_name = "NAME")]
    by: Option<String>,
    /// The interaction's id (with `--all`: `allow` or `deny`).
    #[arg(required_unless_present = "all")]
    id: Option<String>,
    /// `allow` or `deny` an approval (`deny` also declines a question).
    decision: Option<Decision>,
    /// Answer every pending interaction of `--session` (or `--agent`) at once: `allow`
    /// allows its approvals, `deny` denies (or declines) all of them.
    #[arg(long, conflicts_with_all = ["input", "always", "similar", "answers", "content"])]
    all: bool,
    /// With `--all`: only this agent session's interactions.
    #[arg(long, value_name = "SESSION", requires = "all")]
    session: Option<String>,
    /// With `--all`: only this agent's interactions (as the agent names itself).
    #[arg(long, value_name = "AGENT", requires = "all")]
    agent: Option<String>,
    /// With `deny`: the reason, shown to the agent.
    #[arg(long, value_name = "TEXT")]
    reason: Option<String>,
    /// With `deny`: stop the agent's whole turn, not just this call.
    #[arg(long)]
    interrupt: bool,
    /// With `allow`: run this input instead (a JSON object).
    #[arg(long, value_name = "JSON")]
    input: Option<String>,
    /// With `allow`: also allow what the agent suggested, for the rest of its session.
    #[arg(long)]
    always: bool,
    /// With `allow`: also allow similar calls from now on, by the rule given (e.g.
    /// 'Bash(npm run test:*)') or, without one, the rule imrelay proposes.
    #[arg(long, value_name = "RULE", num_args = 0..=1, default_missing_value = "")]
    similar: Option<String>,
    /// With `--similar`: for this agent session (until it expires), or standing (until
    /// revoked).
    #[arg(long, value_enum, default_value = "session")]
    scope: GrantScopeArg,
    /// A question's answer: the question's text or header, `=`, then an option's label or
    /// your own text. Once per question; repeat for several options of a multi-select one.
    /// For a form: a field's name or title, `=`, then its value (a choice by label or value,
    /// several choices separated by commas, yes/no for a checkbox). Fields left out take
    /// their defaults.
    #[arg(long = "answer", value_name = "QUESTION=ANSWER")]
    answers: Vec<String>,
    /// A form's content as a JSON object (field name → value), instead of `--answer`s.
    #[arg(long, value_name = "JSON", conflicts_with = "answers")]
    content: Option<String>,
}

/// How long `--similar` allows similar calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum GrantScopeArg {
    /// This agent session, until it expires.
    Session,
    /// Until revoked (`imrelay grants revoke`).
    Standing,
}

fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}

fn fail(e: &ClientError) -> i32 {
    eprintln!("imrelay: {}", visible_line(&e.to_string()));
    e.exit_code()
}

fn connect(args: &RemoteArgs, config: Option<&std::path::Path>) -> Result<Remote, i32> {
    Remote::new(args, config).map_err(|e| {
        eprintln!("imrelay: {e:#}");
        exit::ERROR
    })
}

/// `imrelay pending [--json]`
pub fn pending(args: PendingArgs, config: Option<&std::path::Path>) -> i32 {
    let remote = match connect(&args.remote, config) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let list = match runtime().map(|rt| rt.block_on(remote.pending())) {
        Ok(Ok(list)) => list,
        Ok(Err(e)) => return fail(&e),
        Err(e) => {
            eprintln!("imrelay: {e}");
            return exit::ERROR;
        }
    };
    let mut out = std::io::stdout().lock();
    let written = if args.json {
        json_list(&remote, &list, &mut out)
    } else if list.is_empty() {
        writeln!(out, "Nothing is waiting for an answer.")
    } else {
        let now = jiff::Timestamp::now();
        let width = list
            .iter()
            .map(|l| l.interaction.id.as_str().len())
            .max()
            .unwrap_or(2)
            .max(2);
        let mut result = writeln!(
            out,
            "{:<width$}  {:<8}  {:>8}  {:<14}  WHAT",
            "ID", "KIND", "LEFT", "AGENT"
        );
        for l in &list {
            let i = &l.interaction;
            result = result.and_then(|_| writeln!(out, "{}", view::row(i, width, now)));
        }
        result
    };
    match written {
        Ok(()) => exit::OK,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => exit::OK,
        Err(e) => {
            eprintln!("imrelay: {e}");
            exit::ERROR
        }
    }
}

/// `pending --json`: every pending interaction whole, as a pretty JSON array. One the
/// listing cut is read whole on its own, and each is written as it comes, so the whole
/// inputs are never all in memory at once.
fn json_list(remote: &Remote, list: &[Listed], out: &mut impl Write) -> std::io::Result<()> {
    if list.is_empty() {
        return writeln!(out, "[]");
    }
    let rt = runtime()?;
    writeln!(out, "[")?;
    for (n, l) in list.iter().enumerate() {
        let whole;
        let i = if l.truncated {
            whole = rt
                .block_on(remote.get(l.interaction.id.as_str()))
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            &whole
        } else {
            &l.interaction
        };
        let text = serde_json::to_string_pretty(&json_view(i)).map_err(std::io::Error::other)?;
        let indented = text.lines().collect::<Vec<_>>().join("\n  ");
        let sep = if n + 1 < list.len() { "," } else { "" };
        writeln!(out, "  {}{sep}", escape_json_invisible(&indented))?;
    }
    writeln!(out, "]")
}

/// `imrelay show ID [--json]`
pub fn show(args: ShowArgs, config: Option<&std::path::Path>) -> i32 {
    let remote = match connect(&args.remote, config) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let i = match runtime().map(|rt| rt.block_on(remote.get(&args.id))) {
        Ok(Ok(i)) => i,
        Ok(Err(e)) => return fail(&e),
        Err(e) => {
            eprintln!("imrelay: {e}");
            return exit::ERROR;
        }
    };
    let text = if args.json {
        // What the agent sent reaches the terminal: nothing in it may act on the terminal.
        escape_json_invisible(&serde_json::to_string_pretty(&json_view(&i)).unwrap_or_default())
            .into_owned()
    } else {
        let width = crossterm::terminal::size()
            .map(|(w, _)| usize::from(w))
            .unwrap_or(80);
        view::full(&Painter::for_stdout(), &i, jiff::Timestamp::now(), width).join("\n")
    };
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{text}") {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            eprintln!("imrelay: {e}");
            exit::ERROR
        }
        _ => exit::OK,
    }
}

/// An interaction as JSON, as the API returns it, with every question's `multiSelect` stated
/// (`false` where the agent left it out): a script sees which questions take several answers
/// without knowing the default.
pub(crate) fn json_view(i: &Interaction) -> Value {
    let mut v = serde_json::to_value(i).unwrap_or(Value::Null);
    if i.kind == Kind::Question
        && let Some(questions) = v
            .pointer_mut("/input/questions")
            .and_then(Value::as_array_mut)
    {
        for q in questions.iter_mut().filter_map(Value::as_object_mut) {
            if !q.get("multiSelect").is_some_and(Value::is_boolean) {
                q.insert("multiSelect".into(), Value::Bool(false));
            }
        }
    }
    v
}

/// Checks that `answer`'s flags go together (whatever the interaction).
fn check_flags(args: &AnswerArgs) -> Result<(), String> {
    let misplaced = |flag: &str, with: &str| format!("{flag} goes with {with}");
    if args.decision != Some(Decision::Deny) {
        if args.reason.is_some() {
            return Err(misplaced("--reason", "deny"));
        }
        if args.interrupt {
            return Err(misplaced("--interrupt", "deny"));
        }
    }
    if args.decision != Some(Decision::Allow) {
        if args.input.is_some() {
            return Err(misplaced("--input", "allow"));
        }
        if args.always {
            return Err(misplaced("--always", "allow"));
        }
        if args.similar.is_some() {
            return Err(misplaced("--similar", "allow"));
        }
    }
    if args.content.is_some() && args.decision.is_some() {
        return Err("give either allow/deny or --content, not both".into());
    }
    match (
        args.decision,
        args.answers.is_empty() && args.content.is_none(),
    ) {
        (Some(_), false) => Err("give either allow/deny or --answer, not both".into()),
        (None, true) => Err(
            "say allow or deny (an approval), or give --answer QUESTION=ANSWER (a question or form) or --content JSON (a form)".into(),
        ),
        _ => Ok(()),
    }
}

/// What `answer`'s arguments ask for, checked against the interaction.
fn answer_for(args: &AnswerArgs, i: &Interaction) -> Result<Answer, String> {
    if let Some(Decision::Deny) = args.decision {
        return Ok(Answer::Deny {
            message: args.reason.clone().filter(|r| !r.trim().is_empty()),
            interrupt: args.interrupt,
        });
    }
    if args.content.is_some() && i.kind != Kind::Form {
        return Err(format!(
            "{} is not a form: --content fills in a form's fields",
            i.id
        ));
    }
    match i.kind {
        Kind::Approval => {
            if !args.answers.is_empty() {
                return Err(format!(
                    "{} is an approval: say allow or deny, --answer is for questions",
                    i.id
                ));
            }
            let updated_input = match &args.input {
                None => None,
                Some(text) => match serde_json::from_str::<Value>(text) {
                    Ok(Value::Object(m)) => Some(m),
                    Ok(_) => return Err("--input: expected a JSON object".into()),
                    Err(e) => return Err(format!("--input is not valid JSON: {e}")),
                },
            };
            Ok(Answer::Allow {
                updated_input,
                always: args.always,
            })
        }
        Kind::Question => {
            if args.decision == Some(Decision::Allow) {
                return Err(format!(
                    "{} is a question: answer it with --answer QUESTION=ANSWER (or deny it)",
                    i.id
                ));
            }
            let questions = crate::interaction::parse_questions(&i.input.map())
                .map_err(|e| format!("the questions cannot be read: {e}"))?;
            let answers: Map<String, Value> =
                super::choose::answers_from_args(&questions, &args.answers)?;
            Ok(Answer::Answers(answers))
        }
        Kind::Form => {
            if args.decision == Some(Decision::Allow) {
                return Err(format!(
                    "{} is a form: fill it in with --answer FIELD=VALUE (or deny it to decline)",
                    i.id
                ));
            }
            let form = crate::interaction::Form::from_input(&i.input.map())
                .map_err(|e| format!("the form cannot be read: {e}"))?;
            if let Some(text) = &args.content {
                let content = match serde_json::from_str::<Value>(text) {
                    Ok(Value::Object(m)) => m,
                    Ok(_) => return Err("--content: expected a JSON object".into()),
                    Err(e) => return Err(format!("--content is not valid JSON: {e}")),
                };
                // Checked as the server checks it, so a mistake is named before it is sent.
                form.accept(&content).map_err(|e| e.to_string())?;
                return Ok(Answer::Accept(content));
            }
            Ok(Answer::Accept(super::choose::form_from_args(
                &form,
                &args.answers,
            )?))
        }
    }
}

/// Whether `i` was resolved by `answer` from `by` through the terminal: an earlier attempt
/// of this same answer that got through though its response was lost.
pub(crate) fn resolved_by_us(i: &Interaction, answer: &Answer, by: Option<&str>) -> bool {
    i.resolution.as_ref().is_some_and(|r| {
        r.via.as_str() == "terminal"
            && r.by.as_deref() == by
            && r.outcome == super::client::outcome_of(answer)
    })
}

/// Attempts `answer` makes while imrelay cannot be reached.
const ANSWER_ATTEMPTS: u32 = 3;

/// `imrelay answer ID ...`
pub fn answer(args: AnswerArgs, config: Option<&std::path::Path>) -> i32 {
    let remote = match connect(&args.remote, config) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("imrelay: {e}");
            return exit::ERROR;
        }
    };
    let by = args
        .by
        .clone()
        .filter(|b| !b.trim().is_empty())
        .or_else(super::login_name);
    if args.all {
        return rt.block_on(answer_all(&remote, args, by));
    }
    if let Err(message) = check_flags(&args) {
        eprintln!("imrelay: {message}");
        return exit::USAGE;
    }
    // Required by clap unless `--all`.
    let id = args.id.clone().unwrap_or_default();
    rt.block_on(answer_one(&remote, &args, &id, by.as_deref()))
}

/// `imrelay answer ID ...` once connected: the interaction read, the answer made from the
/// arguments and sent (with a grant, or tried again while imrelay cannot be reached).
async fn answer_one(remote: &Remote, args: &AnswerArgs, id: &str, by: Option<&str>) -> i32 {
    let painter = Painter::for_stdout();
    let i = match remote.get(id).await {
        Ok(i) => i,
        Err(e) => return fail(&e),
    };
    if !i.is_pending() {
        return fail(&ClientError::AlreadyResolved(Box::new(i)));
    }
    let answer = match answer_for(args, &i) {
        Ok(r) => r,
        Err(message) => {
            eprintln!("imrelay: {}", visible_line(&message));
            return exit::REFUSED;
        }
    };
    if let Some(rule) = &args.similar {
        let scope = match args.scope {
            GrantScopeArg::Session => "session",
            GrantScopeArg::Standing => "standing",
        };
        return match remote
            .respond_granting(id, &answer, by, Some(rule.as_str()), scope)
            .await
        {
            Ok((i, grant)) => {
                if let Some(line) = view::outcome_line(&painter, &i, jiff::Timestamp::now()) {
                    println!("{line}");
                }
                println!("Granted: {}", super::grants::describe(&grant));
                exit::OK
            }
            Err(e) => fail(&e),
        };
    }
    match respond_retrying(remote, id, &answer, by).await {
        Ok(i) => {
            // An approval that needs several people: this answer was a vote.
            if let Some(votes) = crate::interaction::quorum::tally(&i).filter(|_| i.is_pending()) {
                println!("vote recorded: {}", visible_line(&votes));
            }
            if let Some(line) = view::outcome_line(&painter, &i, jiff::Timestamp::now()) {
                println!("{line}");
            }
            for line in view::given_answers(&i) {
                println!("{line}");
            }
            exit::OK
        }
        Err(e) => fail(&e),
    }
}

/// Sends `answer`, up to [`ANSWER_ATTEMPTS`] times while imrelay cannot be reached.
async fn respond_retrying(
    remote: &Remote,
    id: &str,
    answer: &Answer,
    by: Option<&str>,
) -> Result<Interaction, ClientError> {
    let mut backoff = super::client::Backoff::default();
    let mut attempt = 1;
    loop {
        match remote.respond(id, answer, by).await {
            Err(e) if e.is_transient() && attempt < ANSWER_ATTEMPTS => {
                eprintln!("imrelay: {}; trying again", visible_line(&e.to_string()));
                attempt += 1;
                tokio::time::sleep(backoff.delay()).await;
            }
            // An earlier attempt got through; its response was lost.
            Err(ClientError::AlreadyResolved(i))
                if attempt > 1 && resolved_by_us(&i, answer, by) =>
            {
                return Ok(*i);
            }
            other => return other,
        }
    }
}

/// `imrelay answer --all [--session S] [--agent A] allow|deny`: lists what is pending, keeps
/// what the filters select (for `allow`, approvals only: a question or form cannot be
/// allowed), and answers those in one request, printing each one's result.
async fn answer_all(remote: &Remote, args: AnswerArgs, by: Option<String>) -> i32 {
    let decision = match all_decision(&args) {
        Ok(d) => d,
        Err(message) => {
            eprintln!("imrelay: {message}");
            return exit::USAGE;
        }
    };
    let pending = match remote.pending().await {
        Ok(list) => list,
        Err(e) => return fail(&e),
    };
    let chosen: Vec<&Interaction> = pending
        .iter()
        .map(|l| &l.interaction)
        .filter(|i| args.session.is_none() || i.session.as_deref() == args.session.as_deref())
        .filter(|i| args.agent.is_none() || i.agent.as_deref() == args.agent.as_deref())
        .collect();
    let (answerable, skipped): (Vec<&Interaction>, Vec<&Interaction>) = chosen
        .into_iter()
        .partition(|i| decision == Decision::Deny || i.kind == Kind::Approval);
    for i in &skipped {
        println!(
            "skipped {}: a {} is answered on its own (or denied with --all deny)",
            visible_line(i.id.as_str()),
            i.kind.as_str()
        );
    }
    if answerable.is_empty() {
        println!("Nothing pending matches.");
        return exit::OK;
    }
    let ids: Vec<String> = answerable.iter().map(|i| i.id.to_string()).collect();
    let answer = match decision {
        Decision::Allow => Answer::allow(),
        Decision::Deny => Answer::Deny {
            message: args.reason.clone().filter(|r| !r.trim().is_empty()),
            interrupt: args.interrupt,
        },
    };
    let mut code = exit::OK;
    for chunk in ids.chunks(crate::wire::answer::MAX_BULK) {
        let body = match remote.respond_many(chunk, &answer, by.as_deref()).await {
            Ok(b) => b,
            Err(e) => return fail(&e),
        };
        if !print_results(&body, &answerable) {
            code = exit::REFUSED;
        }
    }
    code
}

/// The decision of `--all` (the one word given, in either position), checked against the
/// other flags.
fn all_decision(args: &AnswerArgs) -> Result<Decision, &'static str> {
    let word = args.id.as_deref().map(str::to_ascii_lowercase);
    let decision = match (args.decision, word.as_deref()) {
        (Some(d), None) => d,
        (None, Some("allow")) => Decision::Allow,
        (None, Some("deny")) => Decision::Deny,
        _ => return Err("--all takes allow or deny, and no id"),
    };
    if args.session.is_none() && args.agent.is_none() {
        return Err("--all needs --session or --agent, so that it answers only what you meant");
    }
    if decision == Decision::Allow && (args.reason.is_some() || args.interrupt) {
        return Err("--reason and --interrupt go with deny");
    }
    Ok(decision)
}

/// Prints each result of a bulk answer; whether every one was answered.
fn print_results(body: &Value, answerable: &[&Interaction]) -> bool {
    let mut all = true;
    for r in body["results"].as_array().map(Vec::as_slice).unwrap_or(&[]) {
        let id = visible_line(r["id"].as_str().unwrap_or("?"));
        let what = answerable
            .iter()
            .find(|i| i.id.as_str() == r["id"])
            .map(|i| visible_line(&view::headline(i)))
            .unwrap_or_default();
        if r["status"] == 200 {
            println!(
                "{} {id}  {what}",
                r["outcome"].as_str().unwrap_or("answered")
            );
        } else if r["status"] == 202 {
            // A vote recorded on an approval that needs more people: not refused.
            println!(
                "voted {id}  {what}: {}",
                visible_line(r["error"]["message"].as_str().unwrap_or("vote recorded"))
            );
        } else {
            all = false;
            println!(
                "not answered {id}: {}",
                visible_line(r["error"]["message"].as_str().unwrap_or("refused"))
            );
        }
    }
    all
}
