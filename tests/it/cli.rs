//! The real `imrelay` binary given bad configurations: each error is printed once, names
//! where the value came from and the fix, with exit status 2 (1 for other failures), and never
//! a backtrace, even with `RUST_BACKTRACE=1`.

use std::path::Path;
use std::process::Command;

/// What one run printed and how it ended.
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs `imrelay args` in `dir` with only `env` (and `RUST_BACKTRACE=1`, under which an
/// error used to come with a backtrace) in its environment.
fn imrelay(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut command = bare(dir);
    command
        .args(args)
        .env("RUST_BACKTRACE", "1")
        .env("RUST_LIB_BACKTRACE", "1")
        .envs(env.iter().copied());
    run(&mut command)
}

/// `imrelay` in `dir` with an empty environment.
fn bare(dir: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_imrelay"));
    command.current_dir(dir).env_clear();
    command
}

fn run(command: &mut Command) -> Run {
    let out = command.output().expect("imrelay runs");
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Checks that `run` failed with `code` and one error message, without repeating it as a
/// cause or adding a backtrace; returns the message.
fn one_error(run: &Run, code: i32) -> &str {
    assert_eq!(run.code, Some(code), "{}", run.stderr);
    let stderr = run.stderr.trim_end();
    assert_eq!(stderr.matches("error:").count(), 1, "{stderr}");
    assert!(stderr.starts_with("error: "), "{stderr}");
    for noise in ["Caused by", "backtrace", "<unknown>", "Error:"] {
        assert!(!stderr.contains(noise), "{noise:?} in {stderr}");
    }
    stderr
}

#[test]
fn a_bad_listen_address_in_a_file_names_the_file_and_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("relay.toml");
    std::fs::write(&file, "[server]\nlisten = \"localhost:8795\"\n").unwrap();
    let run = imrelay(dir.path(), &["--config", "relay.toml", "check-config"], &[]);
    let err = one_error(&run, 2);
    assert!(err.contains("server.listen in relay.toml"), "{err}");
    assert!(err.contains("listen = \"127.0.0.1:8795\""), "{err}");
    assert!(run.stdout.is_empty(), "nothing printed as if valid");
    // Through IMRELAY_CONFIG too, and for every command.
    let run = imrelay(
        dir.path(),
        &["healthcheck"],
        &[("IMRELAY_CONFIG", "relay.toml")],
    );
    assert!(one_error(&run, 2).contains("server.listen in relay.toml"));
}

#[test]
fn a_bad_listen_address_in_the_environment_names_the_variable_and_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let run = imrelay(
        dir.path(),
        &["check-config"],
        &[("IMRELAY__SERVER__LISTEN", "localhost:8795")],
    );
    let err = one_error(&run, 2);
    assert!(err.contains("IMRELAY__SERVER__LISTEN: "), "{err}");
    assert!(
        err.contains("Use IMRELAY__SERVER__LISTEN=127.0.0.1:8795"),
        "{err}"
    );
}

#[test]
fn unknown_keys_name_the_nearest_known_one() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("c.toml"), "[server]\nlistn = \"x\"\n").unwrap();
    let run = imrelay(dir.path(), &["-c", "c.toml", "check-config"], &[]);
    let err = one_error(&run, 2);
    assert!(
        err.contains("unknown setting `server.listn` in c.toml"),
        "{err}"
    );
    assert!(err.contains("did you mean `server.listen`?"), "{err}");

    let run = imrelay(
        dir.path(),
        &["check-config"],
        &[("IMRELAY__HOOKS__CLAUDE_CODE__TIMEOUT_SEC", "30")],
    );
    let err = one_error(&run, 2);
    assert!(
        err.contains("environment variable IMRELAY__HOOKS__CLAUDE_CODE__TIMEOUT_SEC"),
        "{err}"
    );
    assert!(
        err.contains("did you mean IMRELAY__HOOKS__CLAUDE_CODE__TIMEOUT_SECS"),
        "{err}"
    );
}

#[test]
fn a_single_underscore_variable_is_ignored_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let run = imrelay(
        dir.path(),
        &["check-config"],
        &[("IMRELAY_SERVER_LISTEN", "0.0.0.0:9999")],
    );
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(
        run.stdout.contains("listen = \"127.0.0.1:8787\""),
        "{}",
        run.stdout
    );
    assert!(
        run.stderr.contains(
            "warning: IMRELAY_SERVER_LISTEN is ignored: the prefix, section and key of a \
             setting's variable are separated by `__`, so use IMRELAY__SERVER__LISTEN"
        ),
        "{}",
        run.stderr
    );
}

#[test]
fn check_config_warns_about_a_channel_nobody_may_answer() {
    let dir = tempfile::tempdir().unwrap();
    let telegram = [
        ("IMRELAY__TELEGRAM__ENABLED", "true"),
        ("IMRELAY__TELEGRAM__TOKEN", "123456:ABC-def_123"),
        ("IMRELAY__TELEGRAM__CHATS", "42"),
    ];
    let run = imrelay(dir.path(), &["check-config"], &telegram);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(
        run.stderr
            .contains("warning: telegram is enabled but telegram.approvers is empty"),
        "{}",
        run.stderr
    );
    let mut with_approver = telegram.to_vec();
    with_approver.push(("IMRELAY__TELEGRAM__APPROVERS", "42"));
    let run = imrelay(dir.path(), &["check-config"], &with_approver);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(!run.stderr.contains("warning"), "{}", run.stderr);
}

#[test]
fn bad_tokens_are_refused_without_printing_them() {
    let dir = tempfile::tempdir().unwrap();
    let token = "one-token-for-both-scopes";
    let run = imrelay(
        dir.path(),
        &["check-config"],
        &[
            ("IMRELAY__AUTH__AGENT_TOKENS", token),
            ("IMRELAY__AUTH__OPERATOR_TOKENS", token),
        ],
    );
    let err = one_error(&run, 2);
    assert!(
        err.contains("auth.agent_tokens[0] is also auth.operator_tokens[0]"),
        "{err}"
    );
    assert!(err.contains("IMRELAY__AUTH__AGENT_TOKENS"), "{err}");
    assert!(err.contains("openssl rand -hex 32"), "{err}");
    assert!(!err.contains(token), "{err}");

    std::fs::write(
        dir.path().join("c.toml"),
        "[auth]\noperator_tokens = [\"operator-token-0123456789\", \" \"]\n",
    )
    .unwrap();
    let run = imrelay(dir.path(), &["-c", "c.toml", "check-config"], &[]);
    let err = one_error(&run, 2);
    assert!(
        err.contains("auth.operator_tokens[1] contains whitespace"),
        "{err}"
    );
    assert!(err.contains("set in c.toml"), "{err}");
    assert!(!err.contains("operator-token-0123456789"), "{err}");

    let run = imrelay(
        dir.path(),
        &["check-config"],
        &[("IMRELAY__AUTH__AGENT_TOKENS", " ")],
    );
    assert!(one_error(&run, 2).contains("IMRELAY__AUTH__AGENT_TOKENS"));
}

#[test]
fn other_failures_are_one_clean_message_with_status_1() {
    let dir = tempfile::tempdir().unwrap();
    let run = imrelay(
        dir.path(),
        &["backup", "copy.db"],
        &[("IMRELAY__STORE__BACKEND", "memory")],
    );
    let err = one_error(&run, 1);
    assert!(err.contains("no database on disk to back up"), "{err}");
}

#[cfg(unix)]
#[test]
fn variables_that_are_not_utf8_are_skipped_unless_they_are_settings() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;

    let dir = tempfile::tempdir().unwrap();
    let not_utf8 = OsStr::from_bytes(b"caf\xe9");
    let with = |name: &str| run(bare(dir.path()).arg("check-config").env(name, not_utf8));
    let other = with("LC_SOMETHING");
    assert_eq!(other.code, Some(0), "{}", other.stderr);
    assert!(!other.stdout.is_empty());
    let setting = with("IMRELAY__SERVER__LISTEN");
    let err = one_error(&setting, 2);
    assert!(
        err.contains("IMRELAY__SERVER__LISTEN is not valid UTF-8"),
        "{err}"
    );
}
