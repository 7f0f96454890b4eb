//! The shell splitter against bash itself.
//!
//! Commands are generated from pieces bash treats specially (expansions, subscripts,
//! quoting, operators, redirections) around commands that allow rules name, and weighed by
//! an allow-only policy. Every command the policy allows is then run by a sandboxed bash that
//! records each simple command it runs (a `DEBUG` trap inherited everywhere) and each
//! program it would start (with an empty `PATH`, `command_not_found_handle` logs the words
//! instead of running anything), in an empty directory, with hostile values in the
//! environment (`X='a[$(touch PWNED)]'`). An allowed command must run nothing but the parts
//! the splitter found: no other program, no more simple commands than parts, no file made.
//!
//! The cases come from a seeded generator: `IMRELAY_ORACLE_SEED` and `IMRELAY_ORACLE_CASES`
//! explore further than the default run does (a failure prints the seed and the command).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use imrelay::interaction::policy::shell::split;
use imrelay::interaction::policy::{Decision, Policy, Rule, RuleSpec};
use imrelay::interaction::{Interaction, InteractionId, now};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// The allow rules the generated commands are weighed against.
const ALLOWED: &[&str] = &[
    "Bash(git status:*)",
    "Bash(ls:*)",
    "Bash(echo:*)",
    "Bash(printf:*)",
    "Bash(test:*)",
    "Bash(cat:*)",
    "Bash(true)",
];

/// Commands the rules name, as they start a simple command.
const HEADS: &[&str] = &[
    "git status",
    "ls",
    "echo",
    "printf",
    "test",
    "cat",
    "true",
    "FOO=1 echo",
    "command printf",
    "builtin test",
];

/// Plain words.
const PLAIN: &[&str] = &[
    "a", "-l", "--", "-v", "-R", "-vx", "%s", "x%s", "'x y'", "\"x y\"", "-f", "README", "./b",
];

/// Words and pieces of words bash reads specially.
const ATOMS: &[&str] = &[
    "'a[$(touch PWNED)]'",
    "\"a[\\$(touch PWNED)]\"",
    "'a[`touch PWNED`]'",
    "a[X]",
    "'a[X]'",
    "$[_]",
    "\"$[_]\"",
    "$[X]",
    "$[ X ]",
    "{1..$[_]}",
    "$((X))",
    "$(( 1 ))",
    "$_",
    "\"$_\"",
    "${X}",
    "${X:-$(touch PWNED)}",
    "$X",
    "$'\\x41'",
    "$\"x\"",
    "\\$[_]",
    "'$[_]'",
    "$",
    "\"$\"",
    "a$",
    "$%",
    "*",
    "?",
    "[ab]",
    "{a,b}",
    "~",
    "~root",
    "a#b",
    "#c",
    "2>&1",
    ">/dev/null",
    "`touch PWNED`",
    "$(touch PWNED)",
    "<(touch PWNED)",
    "a=b",
    "X=1",
    "\\;",
    "';'",
    "%(a[X])T",
    "-va[X]",
    "'\\'",
    "((X))",
    "\\\n",
];

/// What joins two simple commands.
const JOINS: &[&str] = &["; ", " && ", "\n", " || ", " | ", " & ", ";", " ;\n"];

/// What bash does before the command: record every simple command and every program.
const PRELUDE: &str = r#"
command_not_found_handle() {
  printf '%s\037' "$@" >> "$IMRELAY_ORACLE_RUN"
  printf '\036' >> "$IMRELAY_ORACLE_RUN"
  # As a program run would, leave `$_` holding the last word.
  : "${@: -1}"
}
set -T
# The trap keeps `$_` as it found it, or the record would change what bash runs.
trap 'IMRELAY_ORACLE_LAST=$_
[[ ${FUNCNAME[0]-} == command_not_found_handle ]] || printf x >> "$IMRELAY_ORACLE_DEBUG"
: "$IMRELAY_ORACLE_LAST"' DEBUG
"#;

fn policy() -> Policy {
    Policy::new(vec![
        Rule::new(RuleSpec {
            name: "read-only".into(),
            tools: ALLOWED.iter().map(|t| t.to_string()).collect(),
            decision: Some(Decision::Allow),
            ..RuleSpec::default()
        })
        .expect("the oracle's rules compile"),
    ])
}

fn allowed(policy: &Policy, command: &str) -> bool {
    let mut input = serde_json::Map::new();
    input.insert("command".into(), command.into());
    let mut i = Interaction::pending(InteractionId::generate(), "Bash", input, now(), 60);
    i.cwd = Some("/work/app".into());
    policy
        .evaluate(&i, &[])
        .live
        .is_some_and(|d| d.decision == Decision::Allow)
}

fn generate(rng: &mut StdRng) -> String {
    let mut out = String::new();
    for k in 0..rng.random_range(1..=3) {
        if k > 0 {
            out.push_str(JOINS[rng.random_range(0..JOINS.len())]);
        }
        out.push_str(HEADS[rng.random_range(0..HEADS.len())]);
        let atom = |rng: &mut StdRng| {
            if rng.random_bool(0.5) {
                PLAIN[rng.random_range(0..PLAIN.len())]
            } else {
                ATOMS[rng.random_range(0..ATOMS.len())]
            }
        };
        for _ in 0..rng.random_range(0..=3) {
            out.push(' ');
            out.push_str(atom(rng));
            // Two pieces in one word, now and then.
            if rng.random_bool(0.2) {
                out.push_str(atom(rng));
            }
        }
    }
    out
}

/// A sandbox bash runs commands in.
struct Sandbox {
    dir: tempfile::TempDir,
    prelude: PathBuf,
    bash: PathBuf,
}

/// Where `program` is on this process's `PATH` (the sandbox's own `PATH` is empty).
fn which(program: &str) -> PathBuf {
    std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .map(|d| d.join(program))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{program} is needed to check the splitter against bash"))
}

impl Sandbox {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let prelude = dir.path().join("prelude.sh");
        std::fs::File::create(&prelude)
            .and_then(|mut f| f.write_all(PRELUDE.as_bytes()))
            .expect("the prelude is written");
        Self {
            dir,
            prelude,
            bash: which("bash"),
        }
    }

    /// Runs `command`; what bash ran, or why it is more than the parts `split` found.
    fn check(&self, command: &str) -> Result<(), String> {
        let work = tempfile::tempdir_in(self.dir.path()).map_err(|e| e.to_string())?;
        let run = self.dir.path().join(format!("{}.run", uuid()));
        let debug = self.dir.path().join(format!("{}.debug", uuid()));
        let empty = work.path().join("empty-path");
        std::fs::create_dir(&empty).map_err(|e| e.to_string())?;
        let status = Command::new(which("timeout"))
            .arg("5")
            .arg(&self.bash)
            .args(["-c", command])
            .current_dir(work.path())
            .env_clear()
            .env("PATH", &empty)
            .env("HOME", work.path())
            .env("BASH_ENV", &self.prelude)
            .env("IMRELAY_ORACLE_RUN", &run)
            .env("IMRELAY_ORACLE_DEBUG", &debug)
            .env("X", "a[$(touch PWNED)]")
            .env("_", "a[$(touch PWNED)]")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map_err(|e| format!("bash could not be run: {e}"))?;
        let ran = std::fs::read(&run).unwrap_or_default();
        let fired = std::fs::read(&debug).map(|d| d.len()).unwrap_or(0);
        let _ = std::fs::remove_file(&run);
        let _ = std::fs::remove_file(&debug);
        if status.code() == Some(124) {
            return Err("bash did not finish in 5 s".into());
        }
        // What the splitter vouches for: nothing, when it is not confident.
        let split = split(command);
        let parts = if split.confident {
            split.parts
        } else {
            Vec::new()
        };
        let programs: Vec<Vec<String>> = ran
            .split(|b| *b == 0x1e)
            .filter(|c| !c.is_empty())
            .map(|c| {
                c.split(|b| *b == 0x1f)
                    .filter(|w| !w.is_empty())
                    .map(|w| String::from_utf8_lossy(w).into_owned())
                    .collect()
            })
            .collect();
        for p in &programs {
            // Globs expand to the names in the empty directory, or stay as written.
            if !parts.iter().any(|part| same_program(part, p)) {
                return Err(format!(
                    "bash ran {p:?}, which is not one of the parts {parts:?}"
                ));
            }
        }
        if fired > parts.len() {
            return Err(format!(
                "bash ran {fired} simple commands, more than the {} parts {parts:?}",
                parts.len()
            ));
        }
        let made = made_files(work.path(), &empty);
        if !made.is_empty() {
            return Err(format!("bash made {made:?}"));
        }
        Ok(())
    }
}

/// Whether `ran` is the program `part` names (its first words, after its assignments, as
/// the splitter read them; later words may have been expanded by brace or glob expansion).
fn same_program(part: &[String], ran: &[String]) -> bool {
    let words: Vec<&String> = part
        .iter()
        .skip_while(|w| w.contains('=') && !w.starts_with('='))
        .collect();
    match (words.first(), ran.first()) {
        (Some(a), Some(b)) => *a == b,
        _ => false,
    }
}

fn made_files(dir: &Path, except: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p != except)
        .collect()
}

fn uuid() -> String {
    InteractionId::generate().to_string()
}

fn seed() -> u64 {
    std::env::var("IMRELAY_ORACLE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x1e_5ec_b45)
}

fn cases() -> usize {
    std::env::var("IMRELAY_ORACLE_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3000)
}

/// The oracle catches what it is there to catch: a command that runs more than it says.
#[test]
fn the_oracle_sees_a_command_run_inside_an_expansion() {
    let sandbox = Sandbox::new();
    sandbox
        .check("echo hello")
        .expect("a plain echo runs nothing else");
    for bad in [
        "echo $[X]",
        "git status 'a[$(touch PWNED)]'; git status $[_]",
        "printf -v 'a[$(touch PWNED)]' %s x",
        "echo $(touch PWNED)",
    ] {
        let err = sandbox.check(bad).expect_err(bad);
        assert!(
            err.contains("touch") || err.contains("simple commands"),
            "{bad:?}: {err}"
        );
    }
}

/// The attacks of the hardening report are never allowed.
#[test]
fn allow_rules_are_not_walked_around_through_bash_expansions() {
    let policy = policy();
    for cmd in [
        "git status 'a[$(touch PWNED)]'; git status $[_]",
        "git status 'a[$(touch PWNED)]' && git status $[_]",
        "git status 'a[$(touch PWNED)]'\ngit status $[_]",
        "git status 'a[$(touch PWNED)]'; git status \"$[_]\"",
        "git status 'a[$(touch PWNED)]'; ls {1..$[_]}",
        "ls 'a[$(touch PWNED)]'; ls $[_]",
        "echo 'a[$(touch PWNED)]'; echo $[_]",
        "git status $[X]",
        "printf -v 'a[$(touch PWNED)]' %s x",
        "test -v 'a[$(touch PWNED)]'",
    ] {
        assert!(!allowed(&policy, cmd), "{cmd:?} was allowed");
    }
    assert!(allowed(&policy, "git status && ls -l | cat"));
}

/// Every generated command the rules allow runs only what the splitter found.
#[test]
fn every_allowed_command_runs_only_its_parts() {
    let policy = policy();
    let sandbox = Sandbox::new();
    let seed = seed();
    let mut rng = StdRng::seed_from_u64(seed);
    let (mut tried, mut ran) = (0usize, 0usize);
    let mut failures = Vec::new();
    for _ in 0..cases() {
        let cmd = generate(&mut rng);
        tried += 1;
        if !allowed(&policy, &cmd) {
            continue;
        }
        ran += 1;
        if let Err(why) = sandbox.check(&cmd) {
            failures.push(format!("{cmd:?}: {why}"));
        }
    }
    assert!(
        failures.is_empty(),
        "seed {seed}: {} of {ran} allowed commands ran more than their parts:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // The generator must reach the allow rules often, or the check proves little.
    assert!(
        ran * 5 >= tried,
        "only {ran} of {tried} generated commands were allowed"
    );
    eprintln!("shell oracle: seed {seed}, {tried} commands, {ran} allowed and run by bash");
}
