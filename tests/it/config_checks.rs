//! Configurations the real binary used to accept without a word, each now refused (exit 2) or
//! warned about by `check-config`, with the fix; and every mistake of a file said at once.

use std::path::Path;
use std::process::Command;

/// `imrelay --config c.toml check-config` in `dir` with `file` as c.toml and an empty
/// environment: (status, stdout, stderr).
fn check(dir: &Path, file: &str) -> (Option<i32>, String, String) {
    std::fs::write(dir.join("c.toml"), file).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_imrelay"))
        .current_dir(dir)
        .env_clear()
        .args(["--config", "c.toml", "check-config"])
        .output()
        .expect("imrelay runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const ALICE_BOB: &str = "[[people]]\nname = \"alice\"\ntelegram = [111]\n\
    [[people]]\nname = \"bob\"\ntelegram = [222]\n";

const WEBHOOK: &str = "[[webhooks]]\nname = \"ops\"\nurl = \"https://ops.example/hook\"\n\
    secret = \"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\"\n";

#[test]
fn every_mistake_of_a_file_is_said_at_once() {
    let dir = tempfile::tempdir().unwrap();
    // Values of the wrong type in two sections, and an unknown key.
    let (code, out, err) = check(
        dir.path(),
        "[server]\nlisten = \"127.0.0.1\"\n[store]\nbackend = \"postgresql\"\n[outbox]\nmax_attempts = 5\n",
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(out.is_empty(), "{out}");
    assert!(err.contains("3 mistakes, each with its fix:"), "{err}");
    for want in [
        "unknown setting `outbox.max_attempts` in c.toml",
        "server.listen in c.toml: \"127.0.0.1\" has no port.",
        "store.backend in c.toml: \"postgresql\" is not one of the values",
    ] {
        assert!(err.contains(want), "{want:?} not in {err}");
    }
    assert_eq!(err.matches("error:").count(), 1, "{err}");
    // Several values of the wrong type in one section, and in one entry of a list, are each
    // said, not only the first of each.
    let (code, _, err) = check(
        dir.path(),
        "[server]\nlisten = \"127.0.0.1\"\nmax_connections = \"many\"\nmax_event_streams = -3\n\
         [[people]]\nname = \"alice\"\ntelegram = [\"x\"]\nslack = 7\n",
    );
    assert_eq!(code, Some(2), "{err}");
    for want in [
        "server.listen in c.toml",
        "server.max_connections in c.toml",
        "server.max_event_streams in c.toml",
        "people[0]",
    ] {
        assert!(err.contains(want), "{want:?} not in {err}");
    }
    assert!(err.contains("mistakes, each with its fix"), "{err}");
    // An unknown key does not hide values that do not fit, nor one another.
    let (code, _, err) = check(
        dir.path(),
        "[[person]]\nname = \"alice\"\n[log]\nlevel = \"verbose\"\n[outbox]\nretry_base_ms = 0\n",
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("3 mistakes"), "{err}");
    assert!(err.contains("unknown setting `person`"), "{err}");
    assert!(
        err.contains("log.level: \"verbose\" is not a level"),
        "{err}"
    );
    assert!(
        err.contains("outbox.retry_base_ms and outbox.retry_max_secs must be at least 1"),
        "{err}"
    );
}

/// Each configuration, and what `check-config` refuses it with.
#[test]
fn settings_that_can_never_work_together_are_refused_with_the_fix() {
    let table: Vec<(String, &str)> = vec![
        (
            format!(
                "{ALICE_BOB}[[routes]]\nname = \"deploys\"\napprovers = [\"alice\", \"bob\"]\nquorum = 3\n"
            ),
            "routes[0] (\"deploys\").quorum = 3, but only 2 people may answer it (alice, bob): it could never be reached, and every approval would be denied at its deadline. Lower quorum to 2, or add people to approvers",
        ),
        (
            format!(
                "{ALICE_BOB}[[people]]\nname = \"chen\"\ntelegram = [333]\n[[routes]]\nname = \"deploys\"\napprovers = [\"alice\", \"bob\", \"chen\"]\n[[policy]]\nname = \"push\"\ntools = [\"Bash(git push:*)\"]\nroute = [\"deploys\"]\nquorum = 5\n"
            ),
            "policy[0] (\"push\").quorum = 5, but only 3 people may answer it (alice, bob, chen)",
        ),
        (
            format!(
                "{ALICE_BOB}[[routes]]\nname = \"deploys\"\napprovers = [\"alice\", \"bob\"]\nquorum = 2\ndeny_quorum = 3\n"
            ),
            "routes[0] (\"deploys\").deny_quorum = 3 is more than quorum = 2: the denies asked for can be at most the allows asked for. Use deny_quorum = 2 (or less)",
        ),
        (
            "[telegram]\nchats = [-100]\n[[routes]]\nname = \"r\"\ntelegram = [-100]\n".into(),
            "routes[0] (\"r\") sends only to telegram:-100, on channels that are turned off: nothing would be posted (only the inbox and the terminal would see it). Enable the channel (telegram.enabled = true) or send the route elsewhere",
        ),
        (
            format!(
                "[telegram]\nchats = [-100]\n{WEBHOOK}[[routes]]\nname = \"r\"\nwebhooks = [\"ops\"]\ntimeout_secs = 600\nescalate_after_secs = 60\n[routes.escalate_to]\ntelegram = [-100]\n"
            ),
            "routes[0] (\"r\").escalate_to names only telegram:-100, on channels that are turned off: the escalation would post nowhere",
        ),
        (
            "[slack]\nchannels = [\"#team\"]\n".into(),
            "slack.chats[0]: \"#team\" is a name, not a channel id. Slack channel ids look like C0123456789",
        ),
        (
            "[slack]\napprovers = [\"@alice\"]\n".into(),
            "slack.approvers[0]: \"@alice\" is a name, not a user id. Slack user ids look like U0123456789",
        ),
        (
            "[[policy]]\nname = \"git\"\ntools = [\"bash(git status:*)\"]\ndecision = \"allow\"\n"
                .into(),
            "`bash` is not a tool name: tool names are case-sensitive, so it would match nothing; write `Bash`",
        ),
        (
            "[[policy]]\nname = \"git\"\ntools = [\"Bash(git status)*\"]\ndecision = \"allow\"\n"
                .into(),
            "\"*\" follows the `)` that closes the specifier: everything a pattern matches goes inside, e.g. `Bash(git status*)`",
        ),
        (
            "[[routes]]\nname = \"r\"\ntool = [\"bash\"]\n".into(),
            "routes[0] (\"r\").tool[0]: `bash` is not a tool name: tool names are case-sensitive, so it would match nothing; write tool = [\"Bash\"]",
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    let mut wrong = Vec::new();
    for (file, want) in &table {
        let (code, _, err) = check(dir.path(), file);
        if code != Some(2) || !err.contains(want) {
            wrong.push(format!(
                "{file}\n  status {code:?}\n  got:  {err}\n  want: {want}"
            ));
        }
    }
    assert!(wrong.is_empty(), "\n{}", wrong.join("\n"));
}

/// Each configuration, and what `check-config` warns about it (it is still valid).
#[test]
fn settings_that_may_be_meant_but_do_not_work_are_warned_about() {
    let table: Vec<(String, &str)> = vec![
        (
            "[[people]]\nname = \"carol\"\n".into(),
            "people[0] (\"carol\") has no id on any channel: no answer can be recognised as theirs, so they can never answer",
        ),
        (
            format!(
                "{ALICE_BOB}[[routes]]\nname = \"deploys\"\napprovers = [\"alice\", \"bob\"]\nquorum = 2\n"
            ),
            "a quorum is configured, but no operator token has a label: every answer from the inbox, the terminal and the API is one person (the administrator)",
        ),
        (
            format!(
                "{WEBHOOK}[[routes]]\nname = \"r\"\nwebhooks = [\"ops\"]\nescalate_after_secs = 300\n[routes.escalate_to]\nwebhooks = [\"ops\"]\n"
            ),
            "routes[0] (\"r\").escalate_after_secs = 300 is not less than interactions.approval_timeout_secs = 300",
        ),
        (
            format!(
                "[telegram]\nchats = [-100]\n{WEBHOOK}[[routes]]\nname = \"r\"\ntelegram = [-100]\nwebhooks = [\"ops\"]\n"
            ),
            "route \"r\" sends to telegram:-100, on channels that are turned off: nothing is posted there",
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    let mut wrong = Vec::new();
    for (file, want) in &table {
        let (code, _, err) = check(dir.path(), file);
        if code != Some(0) || !err.contains(&format!("warning: {want}")) {
            wrong.push(format!(
                "{file}\n  status {code:?}\n  got:  {err}\n  want: {want}"
            ));
        }
    }
    assert!(wrong.is_empty(), "\n{}", wrong.join("\n"));
    // The routes table does not show a place on a channel that is off as if it worked.
    let (_, out, _) = check(dir.path(), &table[3].0);
    assert!(
        out.contains("#   route r: telegram:-100 turned off, nothing is posted there"),
        "{out}"
    );
}

/// Values the loader used to bend into the type a setting takes, and TOML that is not TOML:
/// each refused, naming the line and the fix.
#[test]
fn loose_values_and_bare_words_are_refused_with_the_fix() {
    let table: Vec<(&str, &str)> = vec![
        (
            "[telegram]\nenabled = \"yes\"\n",
            "telegram.enabled in c.toml: \"yes\" is text, not true or false. Use enabled = true or enabled = false (without quotes).",
        ),
        (
            "[interactions]\napproval_timeout_secs = 1.5\n",
            "interactions.approval_timeout_secs in c.toml: 1.5 is not a whole number. It takes a whole number of seconds (the unit is in its name): use approval_timeout_secs = 2.",
        ),
        (
            "[[routes]]\nname = \"r\"\ntimeout_secs = 900.5\n",
            "routes[0].timeout_secs in c.toml: 900.5 is not a whole number. It takes a whole number of seconds (the unit is in its name): use timeout_secs = 901.",
        ),
        (
            "[[people]]\nname = \"a\"\ntelegram = [1]\n[[people]]\nname = \"b\"\ntelegram = [2]\n[[routes]]\nname = \"r\"\napprovers = [\"a\", \"b\"]\nquorum = \"2\"\n",
            "routes[0].quorum in c.toml: \"2\" is in quotes, which makes it text, not a number. Use quorum = 2 (without quotes).",
        ),
        (
            "[telegram]\ntoken = 123456:TEST\n",
            "Text is written in quotes: token = \"123456:TEST\"",
        ),
        (
            "[telegram]\nenabled = yes\n",
            "On or off is written true or false, without quotes: enabled = true or enabled = false",
        ),
        (
            "[[person]]\nname = \"alice\"\n",
            "unknown setting `person` in c.toml: did you mean `people`?",
        ),
        (
            "[[routes]]\nname = \"r\"\nlabel = [\"prod\"]\n",
            "routes[0] (\"r\").label: `label` is neither a setting of [[routes]] nor a channel: did you mean `labels`?",
        ),
        (
            "[[routes]]\nname = \"r\"\ntimeout_secs = \"15m\"\n",
            "routes[0].timeout_secs in c.toml: \"15m\" is not a number. It takes a whole number of seconds (the unit is in its name): use timeout_secs = 900.",
        ),
        (
            "[[people]]\nname = \"bob\"\ntelegram = [1]\n[[routes]]\nname = \"r\"\ntimeout_secs = 600\nescalate_after_secs = 60\nescalate_to = [\"bob\"]\n",
            "routes[0].escalate_to in c.toml: [\"bob\"] is not a table. escalate_to says where to escalate and who may answer from then on, each on its own line under the route: [routes.escalate_to] then, for example, approvers = [\"bob\"]",
        ),
        (
            "[feishu]\nreceivers = [\"oc_abc\"]\n",
            "feishu.chats in c.toml: [\"oc_abc\"] is text, but each receiver is a table of its type (chat_id, open_id, user_id, union_id or email) and its id: use chats = [{ type = \"chat_id\", id = \"oc_abc\" }].",
        ),
        (
            "[auth]\noperator_tokens = [\"Bearer 3f9a1c77e0b24d5a8c6e\"]\n",
            "auth.operator_tokens[0] starts with `Bearer `, which is how the Authorization header carries a token, not part of it: drop `Bearer ` and keep the rest",
        ),
        (
            "[[routes]]\nname = \"r\"\ncwd = \"srv/shop\"\n",
            "routes[0].cwd[0]: \"srv/shop\" must be an absolute path glob",
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    let mut wrong = Vec::new();
    for (file, want) in &table {
        let (code, _, err) = check(dir.path(), file);
        if code != Some(2) || !err.contains(want) {
            wrong.push(format!(
                "{file}\n  status {code:?}\n  got:  {err}\n  want: {want}"
            ));
        }
    }
    assert!(wrong.is_empty(), "\n{}", wrong.join("\n"));
}

/// A list of one may be written without brackets inside `[[routes]]` and `[[policy]]` too,
/// and each list's spelling of the tool field is read on the other, with a warning.
#[test]
fn a_list_of_one_is_read_without_brackets_and_tool_spellings_are_warned_about() {
    let dir = tempfile::tempdir().unwrap();
    let (code, out, err) = check(
        dir.path(),
        "[[routes]]\nname = \"codex\"\nagent = \"codex\"\ntools = \"Bash\"\n\
         [[policy]]\nname = \"git\"\ntool = \"Bash(git status:*)\"\ndecision = \"allow\"\n",
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("agent = [\"codex\"]"), "{out}");
    assert!(out.contains("tool = [\"Bash\"]"), "{out}");
    assert!(out.contains("tools = [\"Bash(git status:*)\"]"), "{out}");
    assert!(
        err.contains(
            "warning: routes[0].tools in c.toml is read as tool: [[routes]] entries call it `tool`"
        ),
        "{err}"
    );
    assert!(
        err.contains("warning: policy[0].tool in c.toml is read as tools"),
        "{err}"
    );
}
