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

/// The mistakes people make in a configuration, each with the exact message `check-config`
/// prints: the setting (and the file or variable), what was given, what the setting takes,
/// and the fix in the syntax of where it was given. `""` as the file: none.
#[test]
fn configuration_mistakes_are_explained_in_a_persons_words() {
    const CHAT_IDS: &str = "Chat ids are numbers like -1001234567890 (a group) or 123456789 (a private chat); a @name is not an id: send /whoami to the bot in that chat to see its id";
    const TAKES_ADDRESS: &str = "It takes an IP address and a port, not a host name: 127.0.0.1:8787 for this machine only, 0.0.0.0:8787 for every interface";
    /// The file (`""`: none), the environment, and the message.
    type Mistake = (&'static str, Vec<(&'static str, &'static str)>, String);
    let mut table: Vec<Mistake> = vec![
        (
            "[telegram]\nchats = [\"@acme_team\"]\n",
            vec![],
            format!("telegram.chats in c.toml: \"@acme_team\" is a name, not a chat id. {CHAT_IDS}; then use chats = [-1001234567890]."),
        ),
        (
            "[telegram]\nchats = [\"-1001234567890\"]\n",
            vec![],
            "telegram.chats in c.toml: \"-1001234567890\" is in quotes, which makes it text, not a number. Use chats = [-1001234567890] (without quotes).".into(),
        ),
        (
            "",
            vec![("IMRELAY__TELEGRAM__CHATS", "@team")],
            format!("IMRELAY__TELEGRAM__CHATS: \"@team\" is a name, not a chat id. {CHAT_IDS}; then use IMRELAY__TELEGRAM__CHATS=-1001234567890 (several separated by commas)."),
        ),
        (
            "",
            vec![("IMRELAY__TELEGRAM__CHATS", "-1001234567890, acme")],
            format!("IMRELAY__TELEGRAM__CHATS: \"acme\" is not a chat id. {CHAT_IDS}; then use IMRELAY__TELEGRAM__CHATS=-1001234567890 (several separated by commas)."),
        ),
        (
            "[telegram]\nchats = [0]\n",
            vec![],
            "telegram.chats lists 0, which is not a chat id. Chat ids are numbers like -1001234567890 (a group) or 123456789 (a private chat): send /whoami to the bot in that chat to see its id (telegram.chats is set in c.toml)".into(),
        ),
        (
            "[telegram]\napprovers = [\"@alice\"]\n",
            vec![],
            "telegram.approvers in c.toml: \"@alice\" is a name, not a user id. User ids are positive numbers like 123456789; a @name is not an id: send /whoami to the bot to see yours; then use approvers = [123456789].".into(),
        ),
        (
            "[telegram]\napprovers = [-1001234567890]\n",
            vec![],
            "telegram.approvers in c.toml: -1001234567890 is a chat id (a negative number), not a user id: chats go in telegram.chats. User ids are positive numbers like 123456789; a @name is not an id: send /whoami to the bot to see yours.".into(),
        ),
        (
            "[store]\nbackend = \"postgresql\"\n",
            vec![],
            "store.backend in c.toml: \"postgresql\" is not one of the values store.backend takes: \"sqlite\", \"memory\" or \"postgres\". Use backend = \"postgres\".".into(),
        ),
        (
            "",
            vec![("IMRELAY__STORE__BACKEND", "PostgreSQL")],
            "IMRELAY__STORE__BACKEND: \"PostgreSQL\" is not one of the values store.backend takes: \"sqlite\", \"memory\" or \"postgres\". Use IMRELAY__STORE__BACKEND=postgres.".into(),
        ),
        (
            "[[policy]]\nname = \"x\"\ntools = [\"Bash(ls)\"]\ndecision = \"maybe\"\n",
            vec![],
            "policy[0].decision in c.toml: \"maybe\" is not one of the values policy[0].decision takes: \"allow\", \"deny\" or \"ask\". Use one of them, like decision = \"allow\".".into(),
        ),
        (
            "[[routes]]\nname = \"shop\"\nkind = [\"bogus\"]\n",
            vec![],
            "routes[0].kind[0] in c.toml: \"bogus\" is not one of the values routes[0].kind[0] takes: \"approval\", \"question\" or \"form\". Use one of them, like kind = [\"approval\"].".into(),
        ),
        (
            "[[policy]]\nname = \"x\"\ntools = [\"Bash(ls)\"]\nkind = [\"aproval\"]\n",
            vec![],
            "policy[0].kind[0] in c.toml: \"aproval\" is not one of the values policy[0].kind[0] takes: \"approval\", \"question\" or \"form\". Use kind = [\"approval\"].".into(),
        ),
        (
            "[store]\nsynchronous = \"fast\"\n",
            vec![],
            "store.synchronous in c.toml: \"fast\" is not one of the values store.synchronous takes: \"normal\" or \"full\". Use one of them, like synchronous = \"normal\".".into(),
        ),
        (
            "[telegram]\ntransport = \"poll\"\n",
            vec![],
            "telegram.transport in c.toml: \"poll\" is not one of the values telegram.transport takes: \"polling\" or \"webhook\". Use transport = \"polling\".".into(),
        ),
        (
            "[feishu]\nlocale = \"en\"\n",
            vec![],
            "feishu.locale in c.toml: \"en\" is not one of the values feishu.locale takes: \"zh_cn\" or \"en_us\". Use locale = \"en_us\".".into(),
        ),
        (
            "[server]\nlisten = \"127.0.0.1\"\n",
            vec![],
            format!("server.listen in c.toml: \"127.0.0.1\" has no port. {TAKES_ADDRESS}. Use listen = \"127.0.0.1:8787\"."),
        ),
        (
            "",
            vec![("IMRELAY__SERVER__LISTEN", "0.0.0.0")],
            format!("IMRELAY__SERVER__LISTEN: \"0.0.0.0\" has no port. {TAKES_ADDRESS}. Use IMRELAY__SERVER__LISTEN=0.0.0.0:8787."),
        ),
        (
            "[server]\nlisten = 8787\n",
            vec![],
            format!("server.listen in c.toml: \"8787\" has a port but no address. {TAKES_ADDRESS}. Use listen = \"127.0.0.1:8787\" (this machine only)."),
        ),
        (
            "[server]\nlisten = \"relay.example.com:80\"\n",
            vec![],
            format!("server.listen in c.toml: \"relay.example.com\" is a host name. {TAKES_ADDRESS}. Use listen = \"0.0.0.0:80\" (every interface), or the address of one."),
        ),
        (
            "[server]\nlisten = \"0.0.0.0:99999\"\n",
            vec![],
            format!("server.listen in c.toml: \"99999\" is not a port: ports are numbers from 0 to 65535. {TAKES_ADDRESS}."),
        ),
        (
            "listen = \"127.0.0.1:8787\"\n",
            vec![],
            "unknown setting `listen` in c.toml: did you mean `server.listen`? It goes under [server]: listen = ...".into(),
        ),
        (
            "[server]\nshutdown_grace_secs = \"10s\"\n",
            vec![],
            "server.shutdown_grace_secs in c.toml: \"10s\" is not a number. It takes a whole number of seconds (the unit is in its name): use shutdown_grace_secs = 10.".into(),
        ),
        (
            "",
            vec![("IMRELAY__INTERACTIONS__APPROVAL_TIMEOUT_SECS", "5m")],
            "IMRELAY__INTERACTIONS__APPROVAL_TIMEOUT_SECS: \"5m\" is not a number. It takes a whole number of seconds (the unit is in its name): use IMRELAY__INTERACTIONS__APPROVAL_TIMEOUT_SECS=300.".into(),
        ),
        (
            "[outbox]\nretry_base_ms = \"2s\"\n",
            vec![],
            "outbox.retry_base_ms in c.toml: \"2s\" is not a number. It takes a whole number of milliseconds (the unit is in its name): use retry_base_ms = 2000.".into(),
        ),
        (
            "[interactions]\napproval_timeout_secs = -5\n",
            vec![],
            "interactions.approval_timeout_secs in c.toml: -5 is below zero. It takes a whole number of seconds (the unit is in its name), like 300 (the default).".into(),
        ),
        (
            "[server]\nmax_connections = \"lots\"\n",
            vec![],
            "server.max_connections in c.toml: \"lots\" is not a number. It takes a whole number, like max_connections = 1024.".into(),
        ),
        (
            "",
            vec![("IMRELAY__TELEGRAM__ENABLED", "maybe")],
            "IMRELAY__TELEGRAM__ENABLED: \"maybe\" is not true or false. Use IMRELAY__TELEGRAM__ENABLED=true or IMRELAY__TELEGRAM__ENABLED=false.".into(),
        ),
        (
            "[audit]\nenabled = \"sure\"\n",
            vec![],
            "audit.enabled in c.toml: \"sure\" is not true or false. Use enabled = true or enabled = false.".into(),
        ),
        (
            "[[webhooks]]\nname = \"ops\"\nurl = \"https://ops.example/hook\"\n",
            vec![],
            "webhooks[0].secret is missing: every [[webhooks]] entry needs it (see docs/configuration.md)".into(),
        ),
        (
            "[server]\npublic_url = \"imrelay.example.com\"\n",
            vec![],
            "server.public_url must start with http:// or https:// (got \"imrelay.example.com\"): it is the address people and integrations reach this server at, like \"https://imrelay.example.com\" (server.public_url is set in c.toml)".into(),
        ),
        (
            "",
            vec![("IMRELAY__SERVER__PUBLIC_URL", "https://relay example.com")],
            "server.public_url is not a URL (got \"https://relay example.com\"): it is the address people and integrations reach this server at, like \"https://imrelay.example.com\" (server.public_url is set by IMRELAY__SERVER__PUBLIC_URL)".into(),
        ),
        (
            "[[webhooks]]\nname = \"ops\"\nurl = \"ops.example.com/hook\"\nsecret = \"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\"\n",
            vec![],
            "webhooks.ops.url must start with http:// or https://: it is where events are posted, like \"https://ops.example.com/hooks/imrelay\" (webhooks is set in c.toml)".into(),
        ),
        (
            "[telegram]\nchats = \"@team\"\n",
            vec![],
            format!("telegram.chats in c.toml: \"@team\" is a name, not a chat id. {CHAT_IDS}; then use chats = [-1001234567890]."),
        ),
    ];
    table.extend([
        (
            "[outbox]\nmax_attempts = 5\n",
            vec![],
            "unknown setting `outbox.max_attempts` in c.toml: [outbox] has retry_base_ms, retry_max_secs".into(),
        ),
        (
            "[log]\nlevel = \"verbose\"\n",
            vec![],
            "log.level: \"verbose\" is not a level, so it would be read as the name of a target and nothing else would be logged. A level is trace, debug, info, warn, error or off: use \"debug\" (or \"imrelay=debug,info\" for imrelay's own lines only) (log.level is set in c.toml)".into(),
        ),
        (
            "[telegram]\nchats = -100123, -100456\n",
            vec![],
            "c.toml is not valid TOML: TOML parse error at line 2, column 16\n  |\n2 | chats = -100123, -100456\n  |                ^\nunexpected key or value, expected newline, `#`\n\nA list is written in brackets: chats = [-100123, -100456]".into(),
        ),
        (
            "[telegram]\nchats = [@acme_team]\n",
            vec![],
            "c.toml is not valid TOML: TOML parse error at line 2, column 10\n  |\n2 | chats = [@acme_team]\n  |          ^^^^^^^^^^\nstring values must be quoted, expected literal string\n\nTelegram ids are numbers like -1001234567890 (a group) or 123456789 (a person); a @name is not an id: send /whoami to the bot in that chat to see its id".into(),
        ),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let mut wrong = Vec::new();
    for (file, env, want) in &table {
        let mut args = vec!["check-config"];
        if !file.is_empty() {
            std::fs::write(dir.path().join("c.toml"), file).unwrap();
            args = vec!["--config", "c.toml", "check-config"];
        }
        let run = imrelay(dir.path(), &args, env);
        let got = one_error(&run, 2)
            .strip_prefix("error: invalid configuration: ")
            .unwrap_or_else(|| panic!("{}", run.stderr))
            .to_string();
        if got != *want {
            wrong.push(format!("{file:?} {env:?}\n  got:  {got}\n  want: {want}"));
        }
    }
    assert!(wrong.is_empty(), "\n{}", wrong.join("\n"));

    // A single id without the brackets is taken as a list of one.
    std::fs::write(
        dir.path().join("c.toml"),
        "[telegram]\nchats = -1001234567890\n",
    )
    .unwrap();
    let run = imrelay(dir.path(), &["--config", "c.toml", "check-config"], &[]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(
        run.stdout.contains("chats = [-1001234567890]"),
        "{}",
        run.stdout
    );
}

/// The fenced block of `lang` in `doc` that follows `after`.
fn block_after<'a>(doc: &'a str, after: &str, lang: &str) -> &'a str {
    let from = doc.find(after).expect("the marker is in the page") + after.len();
    let open = format!("```{lang}\n");
    let start = doc[from..].find(&open).expect("a fenced block follows") + from + open.len();
    let end = doc[start..].find("```").expect("the block is closed") + start;
    &doc[start..end]
}

#[test]
fn the_teams_example_passes_check_config_and_routes_as_the_page_says() {
    let doc = include_str!("../../docs/teams.md");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("imrelay.toml"),
        block_after(doc, "## A worked example", "toml"),
    )
    .unwrap();
    let run = imrelay(
        dir.path(),
        &["--config", "imrelay.toml", "check-config"],
        &[],
    );
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    // The routes table, exactly as the page shows it, after the settings.
    let table = block_after(doc, "then the routes, first match first:", "");
    assert!(run.stdout.ends_with(table), "{}\n---\n{table}", run.stdout);
    // The whole output is still TOML.
    toml::from_str::<toml::Table>(&run.stdout).unwrap();
    // `imrelay route`, both calls as shown.
    let console = block_after(doc, "Ask which route a call would take:", "console");
    for call in console.split("$ imrelay ").skip(1) {
        let (command, expected) = call.split_once('\n').unwrap();
        let args: Vec<&str> = command.split_whitespace().collect();
        let run = imrelay(dir.path(), &args, &[]);
        assert_eq!(run.code, Some(0), "{}", run.stderr);
        assert_eq!(run.stdout, expected, "{command}");
    }
    // A route naming a chat Telegram is not configured with is refused, named.
    let bad = block_after(doc, "## A worked example", "toml").replace(
        "telegram = [-1001111111111]\napprovers = [\"shop\"]",
        "telegram = [-1009]\napprovers = [\"shop\"]",
    );
    std::fs::write(dir.path().join("bad.toml"), bad).unwrap();
    let run = imrelay(dir.path(), &["--config", "bad.toml", "check-config"], &[]);
    let err = one_error(&run, 2);
    assert!(
        err.contains("routes[2] (\"shop\").telegram[0]: chat -1009 is not in telegram.chats"),
        "{err}"
    );
}

/// The same operator token listed twice (once with a label, once without) passed
/// `check-config` and was then the administrator's, answering routes its person does not
/// approve: refused, naming the entries and never the token.
#[test]
fn an_operator_token_listed_twice_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("c.toml"),
        "[auth]\nagent_tokens = []\noperator_tokens = [{ token = \"op-token-0123456789\", label = \"alice-laptop\" }, \"op-token-0123456789\"]\n",
    )
    .unwrap();
    let run = imrelay(dir.path(), &["-c", "c.toml", "check-config"], &[]);
    let err = one_error(&run, 2);
    assert!(
        err.contains("auth.operator_tokens[1] is the same token as auth.operator_tokens[0]"),
        "{err}"
    );
    assert!(!err.contains("op-token-0123456789"), "{err}");
}

/// Names from the file with bidirectional or invisible characters are printed escaped by
/// `check-config`, as `imrelay route` prints them, never as they are.
#[test]
fn check_config_escapes_invisible_characters_in_names() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("c.toml"),
        "[[people]]\nname = \"ali\u{202e}ce\u{200b}\"\n\n[[routes]]\nname = \"de\u{202e}ploy\"\napprovers = [\"ali\u{202e}ce\u{200b}\"]\n",
    )
    .unwrap();
    let run = imrelay(dir.path(), &["-c", "c.toml", "check-config"], &[]);
    for text in [&run.stdout, &run.stderr] {
        assert!(
            !text.contains('\u{202e}') && !text.contains('\u{200b}'),
            "{text}"
        );
    }
    assert!(run.stdout.contains("ali\\u202ece\\u200b"), "{}", run.stdout);
}

#[test]
fn watch_help_names_every_key() {
    let dir = tempfile::tempdir().unwrap();
    let run = imrelay(dir.path(), &["watch", "--help"], &[]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let help = run.stdout.split_whitespace().collect::<Vec<_>>().join(" ");
    for key in [
        "a allow",
        "d deny",
        "e edit the input",
        "g allow similar calls",
        "s skip",
        "q quit",
        "An approval several people decide takes no e or g",
    ] {
        assert!(help.contains(key), "{key:?} in:\n{}", run.stdout);
    }
}

/// The sections a page presents, in its order: `[server]`, `[hooks.claude_code]`,
/// `[[policy]]`, … from its headings.
fn sections_of(doc: &str) -> Vec<String> {
    doc.lines()
        .filter(|l| l.starts_with('#'))
        .filter_map(|l| {
            let (_, rest) = l.split_once("`[")?;
            let (name, _) = rest.split_once("]`")?;
            Some(name.trim_matches(['[', ']']).to_string())
        })
        .collect()
}

#[test]
fn check_config_prints_the_settings_in_the_order_the_docs_present_them() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("c.toml"),
        "[[webhooks]]\nname = \"oncall\"\nurl = \"https://example.com/hook\"\n\
         secret = \"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\"\n\
         [[policy]]\nname = \"git-read\"\ntools = [\"Bash(git status:*)\"]\ndecision = \"allow\"\n\
         [[people]]\nname = \"alice\"\ntelegram = [42]\n",
    )
    .unwrap();
    let run = imrelay(dir.path(), &["--config", "c.toml", "check-config"], &[]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    // Each section where the docs have it, the empty lists said as comments.
    let printed: Vec<String> = run
        .stdout
        .lines()
        .filter_map(|l| {
            let l = l.strip_prefix("# ").unwrap_or(l);
            let name = l.strip_suffix(": none").unwrap_or(l);
            (name.starts_with('[') && name.ends_with(']'))
                .then(|| name.trim_matches(['[', ']']).to_string())
        })
        .collect();
    let documented = sections_of(include_str!("../../docs/configuration.md"));
    assert_eq!(printed, documented, "\n{}", run.stdout);
    assert!(run.stdout.starts_with("[server]\n"), "{}", run.stdout);
    assert!(
        run.stdout.contains("# [[groups]]: none\n"),
        "{}",
        run.stdout
    );
    // Still TOML, and the same settings as before, only in this order.
    let shown: toml::Table = toml::from_str(&run.stdout).unwrap();
    let settings = imrelay::config::Settings::load_with_env(
        Some(&dir.path().join("c.toml")),
        Some(Default::default()),
    )
    .unwrap();
    // (Secrets serialize as `[redacted]` either way; an empty list is a comment.)
    let mut all = toml::Table::try_from(&settings).unwrap();
    all.retain(|_, v| !matches!(v, toml::Value::Array(a) if a.is_empty()));
    assert_eq!(shown, all);
}

/// Every list of channels a person reads (`--help`, `doctor --help`, the package's
/// description, README's first paragraph, the crate's docs, the MCP server's instructions)
/// names every channel of the registry (`Settings::channels`), by the name people call it.
#[test]
fn every_list_of_channels_names_every_registered_channel() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let read = |f: &str| std::fs::read_to_string(root.join(f)).unwrap();
    let readme = read("README.md");
    let first_paragraph = readme
        .split("\n\n")
        .find(|p| !p.starts_with('#'))
        .unwrap()
        .replace('\n', " ");
    let server = read("src/mcp/server.rs");
    let instructions = server
        .split("const INSTRUCTIONS: &str = \"")
        .nth(1)
        .and_then(|s| s.split("\";").next())
        .unwrap()
        .replace("\\\n", "");
    let lib = read("src/lib.rs").replace("\n//! ", " ");
    let lists = [
        (
            "imrelay --help",
            imrelay(dir.path(), &["--help"], &[]).stdout,
        ),
        (
            "imrelay doctor --help",
            imrelay(dir.path(), &["doctor", "--help"], &[]).stdout,
        ),
        (
            "Cargo.toml's description",
            env!("CARGO_PKG_DESCRIPTION").into(),
        ),
        ("README.md's first paragraph", first_paragraph),
        ("src/mcp/server.rs's INSTRUCTIONS", instructions),
        ("src/lib.rs's docs", lib),
    ];
    let settings = imrelay::config::Settings::defaults().unwrap();
    let mut missing = Vec::new();
    for c in settings.channels() {
        let platform = c.platform();
        // "webhooks" in a list; "Feishu/Lark" may be "Feishu" alone where space is short.
        let short = platform.split('/').next().unwrap_or(platform);
        for (what, text) in &lists {
            let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
            if !flat.contains(short) {
                missing.push(format!("{what} does not name {platform}"));
            }
        }
    }
    assert!(missing.is_empty(), "{missing:#?}");
    // A list in words, as `in_words` writes it (every channel's is checked above, so a new
    // channel changes no line here).
    let channels = settings.channels();
    let in_words = imrelay::channels::in_words;
    assert_eq!(in_words(&channels[..1]), "Telegram");
    assert_eq!(in_words(&channels[..3]), "Telegram, Feishu/Lark and Slack");
    assert!(in_words(&channels).ends_with(" and webhooks"));
}

/// docs/channels.md's table of what each channel offers has one column per registered
/// channel, in the registry's order, and every row a cell for each: a channel added without
/// its column fails here.
#[test]
fn every_registered_channel_has_its_column_in_docs_channels_md() {
    let (columns, rows) = crate::parity::suite::table();
    let settings = imrelay::config::Settings::defaults().unwrap();
    let platforms: Vec<String> = settings
        .channels()
        .iter()
        .map(|c| c.platform().to_string())
        .collect();
    assert_eq!(columns, platforms, "the columns of docs/channels.md");
    for (row, cells) in &rows {
        assert_eq!(cells.len(), columns.len(), "{row}: {cells:?}");
        for cell in cells {
            // A mark may carry a footnote ("✅ ¹").
            let mark = cell.split_whitespace().next().unwrap_or_default();
            assert!(["✅", "✗", "—"].contains(&mark), "{row}: {cells:?}");
        }
    }
}
